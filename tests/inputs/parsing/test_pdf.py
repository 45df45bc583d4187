"""The PDF parser against the sample documents."""

from __future__ import annotations

from tests.inputs.parsing.samples import headings, of_kind, parse_doc


def test_pdf_headings_by_font_size() -> None:
    doc = parse_doc("pdf_DA-1p.pdf")
    found = headings(doc)
    assert found[:2] == [(1, "MAIN GAME"), (2, "CREATURES")]  # 16 pt and 14 pt on 12 pt
    assert (3, "Abomination") in found  # bold at body size: one level further down
    assert doc.title == "MAIN GAME"  # no metadata title
    paragraphs = of_kind(doc, "paragraph")
    assert len(paragraphs) >= 8
    assert all(e.page == 1 for e in doc.elements)
    assert any(p.text.startswith("Thankfully, abominations are rare.") for p in paragraphs)


def test_pdf_metadata_title_bullets_and_pages() -> None:
    doc = parse_doc("pdf_list-item-example.pdf")
    assert doc.title == "Unstructured-test-doc"
    items = [e.text for e in of_kind(doc, "list_item")]
    assert "What are product types?" in items
    assert "What challenges may arise in development?" in items  # wrapped box joined
    assert {e.page for e in doc.elements} == {1, 2}
    assert doc.metadata["pages"] == 2


def test_pdf_pages_are_numbered() -> None:
    doc = parse_doc("pdf_fake-memo-with-duplicate-page.pdf")
    assert [e.page for e in doc.elements if e.text == "Mallori"] == [1, 2]
    assert doc.title == "pdf_fake-memo-with-duplicate-page"  # no metadata title, no heading


def test_pdf_rotated_page_gives_text() -> None:
    doc = parse_doc("rotated-page-90.pdf")
    assert [e.text for e in doc.elements] == [
        "Hello World Test Text",
        "Second line of text here",
        "Rotated page fixture",
    ]
