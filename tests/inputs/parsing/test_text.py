"""Plain-text files, and ``parse_text`` for strings."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexmatch.errors import EmptyDocumentError
from flexmatch.inputs.parsing import parse_file, parse_text
from tests.inputs.parsing.samples import headings


def test_text_file_paragraphs_lists_and_cp1252(tmp_path: Path) -> None:
    path = tmp_path / "notes.TXT"
    path.write_bytes(
        "First   paragraph\nwraps here.\n\n  \nCaf\u00e9 costs \u20ac3:\n- tea\n- coffee\n".encode(
            "cp1252"
        )
    )
    doc = parse_file(path)
    assert doc.title == "notes"
    assert [(e.kind, e.text) for e in doc.elements] == [
        ("paragraph", "First paragraph wraps here."),
        ("paragraph", "Café costs €3:"),
        ("list_item", "tea"),
        ("list_item", "coffee"),
    ]


def test_parse_text_plain() -> None:
    doc = parse_text("One  line\n\ttwo\n\n\nSecond para", title="T")
    assert doc.title == "T"
    assert [e.text for e in doc.elements] == ["One line two", "Second para"]
    assert all(e.kind == "paragraph" for e in doc.elements)


def test_parse_text_markdown_headings() -> None:
    doc = parse_text("# Guide\n\nIntro.\n\n## Setup\n\nRun it.")
    assert doc.title == "Guide"
    assert headings(doc) == [(1, "Guide"), (2, "Setup")]
    assert parse_text("# Guide\n\nIntro.", title="Given").title == "Given"


def test_parse_text_empty() -> None:
    with pytest.raises(EmptyDocumentError):
        parse_text(" \n\t\n")
