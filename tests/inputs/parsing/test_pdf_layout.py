"""PDF layout on the sample files: columns read one after another, tables keep their
rows, and text repeated at the top or bottom of pages is kept out of the chunk text."""

from __future__ import annotations

from pathlib import Path

from flexmatch.inputs.parsing import parse_file
from tests.conftest import DOCS


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
    """A plain PDF (Helvetica, US Letter): each page a list of (height, line of text)."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    font = 3
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    kids = []
    for lines in pages:
        text = b"".join(
            b"BT /F1 11 Tf 72 %d Td (%s) Tj ET\n" % (y, line.encode("latin-1")) for y, line in lines
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (len(objects), font)
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


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
