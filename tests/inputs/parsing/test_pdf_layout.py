"""PDF layout on the sample files: columns read one after another, tables keep their
rows, and text repeated at the top or bottom of pages is kept out of the chunk text."""

from __future__ import annotations

from pathlib import Path

from flexmatch.inputs.parsing import parse_file
from tests.conftest import DOCS
from tests.pdfs import LETTER, pdf_of


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


def _pdf(pages: list[list[tuple[int, str]]]) -> bytes:
    """A plain PDF (Helvetica 11, US Letter): each page a list of (height, line of text)."""
    return pdf_of([[(72, y, 11, line) for y, line in lines] for lines in pages], LETTER)


def test_running_headers_footers_and_page_numbers_stay_out_of_the_text(tmp_path: Path) -> None:
    bodies = [
        "Budgets are set in March.",
        "Travel needs approval by a manager.",
        "Laptops last four years.",
    ]
    pages = [
        [(750, f"ACME Staff Handbook - chapter {n}"), (600, body), (40, f"Page {n} of 3")]
        for n, body in enumerate(bodies, start=1)
    ]
    path = tmp_path / "handbook.pdf"
    path.write_bytes(_pdf(pages))
    parsed = parse_file(path)
    assert [e.text for e in parsed.elements] == bodies
    assert [e.page for e in parsed.elements] == [1, 2, 3]
    # not lost: stored once in the metadata, as a Word document's are
    assert parsed.metadata["page_headers"] == [
        f"ACME Staff Handbook - chapter {n}" for n in (1, 2, 3)
    ]
    assert "page_footers" not in parsed.metadata  # page numbers only


def test_a_duplicated_page_is_not_furniture() -> None:
    parsed = parse_file(DOCS / "pdf_fake-memo-with-duplicate-page.pdf")
    texts = [e.text for e in parsed.elements]
    assert texts.count("May 5, 2023") == 2
    assert "page_headers" not in parsed.metadata
