"""The RTF parser: the sample document, and a ``.rtf`` file that is not RTF."""

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


def test_rtf_outline_levels_are_headings() -> None:
    doc = parse_doc("fake-doc.rtf")  # Pandoc-style: "\\outlinelevel0 \\b \\fs36 My First Heading"
    assert [(e.kind, e.level, e.text) for e in doc.elements[:2]] == [
        ("heading", 1, "My First Heading"),
        ("paragraph", 0, "My first paragraph."),
    ]
    assert doc.title == "My First Heading"  # no \\info title: the first heading


def test_rtf_word_style_outline_levels(tmp_path: Path) -> None:
    """Word writes the level in the stylesheet too (not text) and 9 for body text."""
    path = tmp_path / "plan.rtf"
    path.write_text(
        "{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0 Calibri;}}\n"
        "{\\stylesheet{\\ql \\snext0 Normal;}{\\s1\\keepn\\outlinelevel0 \\b heading 1;}"
        "{\\s2\\outlinelevel1 \\sbasedon0 heading 2;}}\n"
        "{\\info{\\title Quarterly Plan}}\n"
        "\\pard\\plain \\s1\\keepn\\outlinelevel0\\b\\fs32 Overview\\par\n"
        "\\pard\\plain \\ql Body text here.\\par\n"
        "\\pard\\plain \\s2\\outlinelevel1 Details of the plan\\par\n"
        "\\pard\\plain \\outlinelevel9 Body text at level nine\\par\n"
        "\\pard\\plain \\outlinelevel10 Not a level at all\\par\n}",
        encoding="ascii",
    )
    doc = parse_file(path)
    assert doc.title == "Quarterly Plan"
    assert [(e.kind, e.level, e.text) for e in doc.elements] == [
        ("heading", 1, "Overview"),
        ("paragraph", 0, "Body text here."),
        ("heading", 2, "Details of the plan"),
        ("paragraph", 0, "Body text at level nine"),
        ("paragraph", 0, "Not a level at all"),
    ]


def test_not_rtf(tmp_path: Path) -> None:
    path = tmp_path / "fake.rtf"
    path.write_text("plain words", encoding="utf-8")
    with pytest.raises(ParseError, match=r"fake\.rtf"):
        parse_file(path)
