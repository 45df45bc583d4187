"""CSV and TSV files: every row readable on its own, located by its row number.

Like a spreadsheet's sheet: when the first row is a header (two or more distinct labels
that are not numbers), it becomes a heading the rows are filed under, and each data row
is written as "Header: value; Header: value", so a single retrieved row still says what
each value means; a chunk of rows cites its row range (``prices.csv rows 2-40``; the
header is row 1). A CSV file's delimiter is detected (comma, semicolon, tab or bar).

Rows are read as a stream, and consecutive short rows are gathered into one table
element (a line each, ``GROUP_TOKENS`` at most): memory stays in proportion to the
file's bytes, so a 4 MB file of 2 million one-letter rows is indexed like any other
(one element a row took 4 GB to parse it).
"""

from __future__ import annotations

import csv
import io
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, clean_inline, finish, parse_errors
from flexmatch.inputs.parsing.text import decode_text, looks_binary
from flexmatch.inputs.parsing.xlsx import _looks_like_header as looks_like_header
from flexmatch.models import Location, ParsedDocument
from flexmatch.text import count_tokens

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # one long cell is data, not an error
# rows gathered into one element up to this many tokens: under the built-in chunkers'
# budgets (window 200, structure and code 400 tokens), which never cut one, and a file
# of millions of short rows is tens of thousands of elements, not millions (a chunker
# set to fewer tokens cuts a gathered element between its rows, as it cuts a table)
GROUP_TOKENS = 100
SNIFF_LINES = 200  # the lines the delimiter is detected from


def _delimiter(text: str) -> str:
    """The delimiter the first lines use (the sniffer takes time in proportion to the
    square of the lines it is shown: 64 KB of one-letter rows took seconds)."""
    sample = "\n".join(text[:65536].split("\n")[:SNIFF_LINES])
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def _rows(text: str, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """(row number, cells) of the non-empty rows, as they are read; a row is a record
    (quoted cells may span lines), numbered from 1."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    for number, row in enumerate(reader, start=1):
        cells = [c if c.isalnum() else clean_inline(c) for c in row]  # most cells: as is
        if any(cells):
            yield number, cells


class _Rows:
    """Consecutive rows gathered into one table element while they fit in
    ``GROUP_TOKENS``: a row is a line of it, its location the rows it spans."""

    def __init__(self, builder: ElementBuilder) -> None:
        self.builder = builder
        self.lines: list[str] = []
        self.first = self.last = self.tokens = 0

    def add(self, number: int, line: str) -> None:
        cost = count_tokens(line)
        if self.lines and (number != self.last + 1 or self.tokens + cost > GROUP_TOKENS):
            self.flush()
        if not self.lines:
            self.first, self.tokens = number, 0
        self.lines.append(line)
        self.last, self.tokens = number, self.tokens + cost

    def flush(self) -> None:
        if self.lines:
            where = Location(row_start=self.first, row_end=self.last)
            text = "\n".join(self.lines)
            self.builder.add("table", text, location=where, cleaned=True)
            self.lines = []


def _pairs(header: list[str], row: list[str]) -> str:
    """A data row as "Header: value; Header: value" (empty cells left out)."""
    return "; ".join(
        f"{header[i] if i < len(header) and header[i] else f'Column {i + 1}'}: {v}"
        for i, v in enumerate(row)
        if v
    )


def _parse(path: Path, delimiter: str | None, fmt: str) -> ParsedDocument:
    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not {fmt}")
    builder = ElementBuilder()
    count = 0
    with parse_errors(path, fmt):
        text = decode_text(data)
        del data
        rows = _rows(text, delimiter or _delimiter(text))
        first = next(rows, None)
        if first is None:
            return finish(path, builder, path.stem)
        second = next(rows, None)
        number, header = first
        gathered = _Rows(builder)
        if second is not None and looks_like_header(header, [second[1]]):
            where = Location(row_start=number, row_end=number)
            builder.add("heading", " | ".join(c for c in header if c), level=1, location=where)
            count = 1
            for number, row in itertools.chain([second], rows):
                gathered.add(number, _pairs(header, row))
                count += 1
        else:
            for number, row in itertools.chain([first], [second] if second else [], rows):
                gathered.add(number, " | ".join(c for c in row if c))
                count += 1
        gathered.flush()
    return finish(path, builder, path.stem, {"rows": count})


def parse_csv(path: Path) -> ParsedDocument:
    """Parse a .csv file (its delimiter detected)."""
    return _parse(path, "\t" if path.suffix.lower() in (".tsv", ".tab") else None, "CSV")


def parse_tsv(path: Path) -> ParsedDocument:
    """Parse a .tsv/.tab file (tab-separated)."""
    return _parse(path, "\t", "TSV")
