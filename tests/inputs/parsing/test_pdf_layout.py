"""PDF layout on the shared real files: columns read one after another, tables keep their
rows, and text repeated at the top or bottom of pages is kept out of the chunk text."""

from __future__ import annotations

from pathlib import Path

from flexmatch.inputs.parsing import parse_file

DOCS = Path(__file__).resolve().parents[4] / "shared" / "data" / "docs"


def test_two_column_page_reads_column_by_column() -> None:
    elements = parse_file(DOCS / "pdf_list-item-example.pdf").elements
    headings = [e.text for e in elements if e.kind == "heading"]
    assert headings[:3] == [
        "Module One - Introduction to Product Development and Quality Assurance",
        "Module Two: Initial Planning and Step 1: Concept Development",
        "Module Three: Step 2: Design and Prototyping",
    ]
    items = [e.text for e in elements if e.kind == "list_item"]
    # each column's wrapped items stay whole, not joined with the other column's lines
    assert "Ensuring standards and efficiency in development" in items
    assert "Collaboration, responsibilities, and training" in items
    texts = [e.text for e in elements]
    left_last = texts.index("Timescales and conduct of development")
    assert left_last < texts.index("Module Three: Step 2: Design and Prototyping")


def test_number_table_keeps_its_cells_paired() -> None:
    elements = parse_file(DOCS / "pdf_all-number-table.pdf").elements
    assert [e.kind for e in elements] == ["table"]
    rows = elements[0].text.splitlines()
    assert rows[0] == "200.01 | 1"
    assert rows[-1] == "1600.01 | 15"
    assert len(rows) == 8
