"""The Word (.docx) parser against the shared sample documents."""

from __future__ import annotations

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
