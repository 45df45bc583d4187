"""A table longer than the chunk budget is cut between its rows, its header row repeated
at the top of every piece and each piece saying where it is (page, rows or lines): on a
generated long table and on a real PDF table."""

from __future__ import annotations

import asyncio
import itertools

from flexmatch.chains import ChainContext, Chunker, build_chain
from flexmatch.config import ChainRef
from flexmatch.engine.chains.chunker._budget import split_table
from flexmatch.inputs.parsing import parse_file
from flexmatch.inputs.parsing.markdown import markdown_to_builder
from flexmatch.models import Document, Element, Location, Section
from flexmatch.text import count_tokens
from tests.conftest import DOCS

HEADER = "Country | Capital | Population"


def _rows(count: int) -> list[str]:
    return [f"Country {i} | Capital city {i} | {1000 + i} thousand" for i in range(1, count + 1)]


def _sections(elements: list[Element], max_tokens: int) -> list[Section]:
    chunker = build_chain(
        ChainRef(chain="structure", params={"max_tokens": max_tokens, "overlap_tokens": 0}),
        Chunker,
        ChainContext(),
    )
    document = Document(id="d", uri="t", source="s", title="t", elements=elements)
    return asyncio.run(chunker.run(document))


def _body(sections: list[Section]) -> list[str]:
    """Every row of every piece but the repeated header, in order."""
    return [row for s in sections for row in s.text.split("\n")[1:]]


def test_long_table_pieces_each_start_with_the_header_and_keep_every_row_once() -> None:
    rows = _rows(60)
    table = Element(kind="table", text="\n".join([HEADER, *rows]), page=3)
    sections = _sections([Element(kind="heading", text="Capitals", level=1), table], 80)
    assert len(sections) > 3
    for section in sections:
        assert section.text.split("\n")[0] == HEADER
        assert count_tokens(section.text) <= 80
        assert section.heading_path == ["Capitals"]
        assert section.location == Location(page=3)
    assert _body(sections) == rows  # cut between rows: none lost, split or repeated


def test_sheet_rows_and_markdown_lines_of_each_piece() -> None:
    rows = _rows(30)
    table = "\n".join([HEADER, *rows])
    cut = split_table(table, 60)
    spans = [(first, last) for _, first, last in cut]
    assert spans[0][0] == 0 and spans[-1][1] == 30
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans))

    sheet = Element(kind="table", text=table, location=Location(sheet="S", row_start=5))
    located = _sections([sheet], 60)
    assert [(s.location.row_start, s.location.row_end) for s in located if s.location] == [
        (5 + first, 5 + last) for first, last in spans
    ]

    # A Markdown table: header on line 3, its delimiter row on line 4, row k on line 4 + k.
    text = "# Capitals\n\n" + "\n".join(
        ["| Country | Capital | Population |", "|---|---|---|"] + [f"| {r} |" for r in rows]
    )
    builder, _ = markdown_to_builder(text)
    sections = _sections(builder.elements, 60)
    lines = text.split("\n")
    for section in sections:
        assert section.text.split("\n")[0] == HEADER
        assert section.location is not None and section.location.line_end is not None
        last = lines[section.location.line_end - 1]
        assert last == f"| {section.text.split(chr(10))[-1]} |"
    assert sections[0].location is not None and sections[0].location.line_start == 3
    assert _body(sections) == rows


def test_a_row_over_the_budget_is_cut_into_windows_under_the_header() -> None:
    long_row = "Atlantis | " + " ".join(f"word{i}" for i in range(120)) + " | 0"
    pieces = split_table("\n".join([HEADER, "A | B | 1", long_row, "C | D | 2"]), 40)
    assert all(text.split("\n")[0] == HEADER for text, _, _ in pieces)
    assert all(count_tokens(text) <= 40 for text, _, _ in pieces)
    assert next((first, last) for _, first, last in pieces) == (0, 1)
    assert {(first, last) for _, first, last in pieces[1:-1]} == {(2, 2)}
    assert pieces[-1][1:] == (3, 3)


def test_real_pdf_table_split_repeats_its_first_row_and_keeps_its_page() -> None:
    parsed = parse_file(DOCS / "pdf_all-number-table.pdf")
    (table,) = [e for e in parsed.elements if e.kind == "table"]
    rows = table.text.split("\n")
    assert rows[0] == "200.01 | 1" and len(rows) == 8  # cells paired, one row a line
    sections = [s for s in _sections(parsed.elements, 20) if "|" in s.text]
    assert len(sections) > 1
    assert all(s.text.split("\n")[0] == rows[0] for s in sections)
    assert _body(sections) == rows[1:]
    assert all(s.location is not None and s.location.page == 1 for s in sections)
