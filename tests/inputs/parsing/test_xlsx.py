"""The Excel (.xlsx) parser against the shared sample workbook."""

from __future__ import annotations

from tests.inputs.parsing.samples import headings, of_kind, parse_doc


def test_xlsx_rows_rendered_with_headers() -> None:
    doc = parse_doc("stanley-cups.xlsx")
    assert headings(doc) == [(1, "Stanley Cups"), (1, "Stanley Cups Since 67")]
    first, second = of_kind(doc, "table")
    assert "Team: Maple Leafs; Location: TOR; Stanley Cups: 13" in first.text.splitlines()
    assert "Team: Maple Leafs; Location: TOR; Stanley Cups: 0" in second.text.splitlines()
    assert "Team: Blues; Location: STL; Stanley Cups: 1" in first.text.splitlines()
    assert doc.metadata["sheets"] == ["Stanley Cups", "Stanley Cups Since 67"]
