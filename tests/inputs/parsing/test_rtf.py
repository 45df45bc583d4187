"""The RTF parser: the shared sample document, and a ``.rtf`` file that is not RTF."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing import parse_file
from tests.inputs.parsing.samples import of_kind, parse_doc


def test_rtf_paragraphs_and_table() -> None:
    doc = parse_doc("fake-doc.rtf")
    assert "My first paragraph." in [e.text for e in of_kind(doc, "paragraph")]
    (table,) = of_kind(doc, "table")
    assert table.text.splitlines() == [
        "Column 1 | Column 2",
        "Row 1, Cell 1 | Row 1, Cell 2",
        "Row 2, Cell 1 | Row 2, Cell 2",
    ]


def test_not_rtf(tmp_path: Path) -> None:
    path = tmp_path / "fake.rtf"
    path.write_text("plain words", encoding="utf-8")
    with pytest.raises(ParseError, match=r"fake\.rtf"):
        parse_file(path)
