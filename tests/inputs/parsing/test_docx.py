"""The Word (.docx) parser against the sample documents."""

from __future__ import annotations

from pathlib import Path

from flexmatch.inputs.parsing import parse_file
from tests.inputs.parsing.samples import headings, of_kind, parse_doc


def test_docx_headings_and_lists() -> None:
    doc = parse_doc("simple.docx")
    assert headings(doc) == [(1, "These are a few of my favorite things:")]
    assert doc.title == "These are a few of my favorite things:"
    items = [e.text for e in of_kind(doc, "list_item")]
    assert "- Hockey" in items  # "List Bullet" style
    assert "- Parrots" in items  # a typed "• " bullet
    assert "This is my third thought." in doc.text


def test_docx_numbered_paragraphs_are_list_items() -> None:
    doc = parse_doc("example-list-items-multiple.docx")
    items = [e.text for e in of_kind(doc, "list_item")]
    assert len(items) == 10
    dummy = "This is simply dummy text of the printing and typesetting industry."
    fox = "The quick brown fox jumps over the lazy dog."
    # numbering properties give the marker (bullet or numbered, counted per list) and
    # the nesting; a list that starts at Word's third level is still a top-level list
    assert [item[:30] for item in items] == [
        item[:30]
        for item in [
            f"- {dummy}",
            f"- {dummy}",
            f"1. {dummy}",
            f"2. {dummy}",
            f"   1. {fox}",
            f"   2. {fox}",
            "1. Trying various lists.",
            "2. Trying various lists.",
            "   1. Trying more lists.",
            f"      1. {dummy}",
        ]
    ]
    assert "Lorem Ipsum 2" in [e.text for e in of_kind(doc, "paragraph")]


def test_docx_tables_in_document_order() -> None:
    doc = parse_doc("docx-tables.docx")
    kinds = [e.kind for e in doc.elements]
    assert kinds == ["paragraph", "table"] * 3
    simple, nested, merged = of_kind(doc, "table")
    assert simple.text == "Header Col 1 | Header Col 2\nLorem ipsum | A link example"
    assert "[e | f; g&t | h]" in nested.text
    assert merged.text.splitlines()[0] == "a | b"  # a horizontally merged cell appears once


def test_docx_table_before_paragraphs() -> None:
    doc = parse_doc("fake_table.docx")
    assert [e.kind for e in doc.elements] == ["table", "paragraph"]
    assert doc.elements[0].text.startswith("Header Col 1 | Header Col 2")


def test_docx_headers_and_footers_are_metadata_not_chunk_text() -> None:
    """Page furniture: kept out of the text, stored once in the metadata (tables too)."""
    doc = parse_doc("docx-hdrftr.docx")
    assert doc.metadata["page_headers"] == [
        "First header para",
        "Last header para",
        "Table cell1 | Table cell2",
    ]
    assert doc.metadata["page_footers"][:2] == ["para1", "para2"]
    assert doc.text == "Main document"
    assert doc.title == "First header para"  # no other title: the header names it

    handbook = parse_doc("handbook-1p.docx")
    assert handbook.metadata["page_headers"] == ["US Trustee Handbook"]
    assert handbook.metadata["page_footers"] == ["Copyright"]
    assert "US Trustee Handbook" not in handbook.text and "Copyright" not in handbook.text
    assert handbook.title == "US Trustee Handbook"


def test_docx_page_numbers_and_linked_headers_are_read_once(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_paragraph("Body of the first section.")
    first = document.sections[0]
    first.header.paragraphs[0].text = "Acme quarterly report"
    first.footer.paragraphs[0].text = "Page 7 of 12"
    document.add_section()  # its header and footer are linked to the first ones
    document.add_paragraph("Body of the second section.")
    document.save(str(tmp_path / "report.docx"))

    doc = parse_file(tmp_path / "report.docx")
    assert doc.metadata["page_headers"] == ["Acme quarterly report"]
    assert "page_footers" not in doc.metadata  # only a page number
    assert "Acme" not in doc.text and "Page 7" not in doc.text
