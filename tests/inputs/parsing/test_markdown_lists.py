"""Markdown lists keep their markers and nesting (``- ``, ``1. ``, indentation) in the
element and chunk text, on real files: the Apache licence's numbered sections and pip's
nested requirement-specifier list."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from flexmatch.chains import ChainContext, Chunker, build_chain
from flexmatch.config import ChainRef
from flexmatch.inputs.parsing import parse_file, parse_text
from flexmatch.inputs.parsing.markdown import markdown_to_builder
from flexmatch.models import Document
from tests.inputs.parsing.samples import of_kind, parse_doc

PIP_SPECIFIERS = Path("/usr/share/doc/python3-pip/html/reference/requirement-specifiers.md")


def _items(text: str) -> list[str]:
    builder, _ = markdown_to_builder(text)
    return [e.text for e in builder.elements if e.kind == "list_item"]


def test_numbered_sections_of_the_apache_licence_keep_their_numbers() -> None:
    items = [e.text for e in of_kind(parse_doc("LICENSE-Apache-2.0.md"), "list_item")]
    numbered = [text.split(" ", 1)[0] for text in items if not text.startswith(" ")]
    assert numbered == [f"{n}." for n in range(1, 10)]
    # a later paragraph of section 1 stays under it, indented to its text
    assert '   "License" shall mean the terms and conditions' in "\n".join(items)


@pytest.mark.skipif(not PIP_SPECIFIERS.is_file(), reason="python3-pip's docs not installed")
def test_pip_nested_list_chunk_reads_as_the_markdown_list() -> None:
    parsed = parse_file(PIP_SPECIFIERS)
    document = Document(
        id="d", uri="r.md", source="s", title=parsed.title, elements=parsed.elements
    )
    chunker = build_chain(ChainRef(chain="structure", params={}), Chunker, ChainContext())
    sections = asyncio.run(chunker.run(document))
    overview = next(s for s in sections if s.heading_path[-1:] == ["Overview"])
    lines = [line for line in overview.text.split("\n") if line]
    assert lines[1:7] == [
        "- name-based, which is composed of:",
        "  - a package name (eg: requests)",
        '  - optionally, a set of "extras" that serve to install optional dependencies'
        " (eg: security)",
        "  - optionally, constraints to apply on the version of the package",
        "  - optionally, environment markers",
        "- URL-based, which is composed of:",
    ]
    assert overview.location is not None and (
        overview.location.line_start,
        overview.location.line_end,
    ) == (19, 33)


def test_ordered_lists_count_from_their_start_and_nest_past_code_and_paragraphs() -> None:
    text = (
        "3. first\n\n   more of first\n\n   - nested\n     1. deeper\n\n"
        "   ```\n   code\n   ```\n   - after code\n4. second\n1. third\n\nplain\n\n* x\n+ y\n"
    )
    assert _items(text) == [
        "3. first",
        "   more of first",
        "   - nested",
        "     1. deeper",
        "   - after code",
        "4. second",
        "5. third",  # CommonMark counts on from the list's start
        "- x",
        "- y",
    ]


def test_markdown_text_without_a_file_keeps_markers_too() -> None:
    parsed = parse_text("# Steps\n\n1. one\n   - sub\n2. two\n")
    assert [e.text for e in parsed.elements if e.kind == "list_item"] == [
        "1. one",
        "   - sub",
        "2. two",
    ]
