"""The Markdown parser: the sample files and a written ``.markdown`` file."""

from __future__ import annotations

from pathlib import Path

from flexmatch.inputs.parsing import parse_file
from tests.inputs.parsing.samples import headings, of_kind, parse_doc


def test_markdown_headings_and_code() -> None:
    doc = parse_doc("codeblock.md")
    assert headings(doc) == [(2, "HTML Example"), (2, "XML Example")]
    code = of_kind(doc, "code")
    assert len(code) == 3
    assert code[0].text.startswith("<!DOCTYPE html>\n<html")
    assert "    <to>Tove</to>" in code[1].text  # indentation kept
    assert doc.title == "codeblock"  # no h1


def test_markdown_plain_text_licence() -> None:
    doc = parse_doc("LICENSE-Apache-2.0.md")
    assert "Grant of Copyright License" in doc.text
    assert not of_kind(doc, "code")  # indented paragraphs are not code
    assert any(e.text.startswith("2. Grant of Copyright License") for e in doc.elements)


def test_markdown_tables_lists_and_front_matter(tmp_path: Path) -> None:
    path = tmp_path / "notes.markdown"
    path.write_text(
        "---\ntitle: Front Title\n---\n# Big\n\nSome *emphasis* and [a link](http://x).\n\n"
        "- one\n- two\n\n| A | B |\n|---|---|\n| 1 | 2 |\n",
        encoding="utf-8",
    )
    doc = parse_file(path)
    assert doc.title == "Front Title"
    assert [(e.kind, e.text) for e in doc.elements] == [
        ("heading", "Big"),
        ("paragraph", "Some emphasis and a link."),
        ("list_item", "- one"),
        ("list_item", "- two"),
        ("table", "A | B\n1 | 2"),
    ]
