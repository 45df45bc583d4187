"""The Excel (.xlsx) parser against the sample workbook."""

from __future__ import annotations

from tests.inputs.parsing.samples import headings, of_kind, parse_doc


def test_xlsx_rows_rendered_with_headers() -> None:
    doc = parse_doc("stanley-cups.xlsx")
    assert headings(doc) == [(1, "Stanley Cups"), (1, "Stanley Cups Since 67")]
    rows = [(e.location.sheet, e.location.row_start, e.text) for e in of_kind(doc, "table")]
    # one element per data row, located by its sheet and its row number in that sheet
    assert ("Stanley Cups", 5, "Team: Maple Leafs; Location: TOR; Stanley Cups: 13") in rows
    assert ("Stanley Cups Since 67", 5, "Team: Maple Leafs; Location: TOR; Stanley Cups: 0") in rows
    assert ("Stanley Cups", 3, "Team: Blues; Location: STL; Stanley Cups: 1") in rows
    assert len(rows) == 6  # row 1 is the sheet's caption, row 2 its header
    assert doc.metadata["sheets"] == ["Stanley Cups", "Stanley Cups Since 67"]
