"""CSV and TSV files: every row readable on its own, located by its row number.

Like a spreadsheet's sheet: when the first row is a header (two or more distinct labels
that are not numbers), it becomes a heading the rows are filed under, and each data row
is written as "Header: value; Header: value", so a single retrieved row still says what
each value means; a chunk of rows cites its row range (``prices.csv rows 2-40``; the
header is row 1). A CSV file's delimiter is detected (comma, semicolon, tab or bar).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, clean_inline, finish, parse_errors
from flexmatch.inputs.parsing.text import decode_text, looks_binary
from flexmatch.inputs.parsing.xlsx import _looks_like_header as looks_like_header
from flexmatch.models import Location, ParsedDocument

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # one long cell is data, not an error


def _delimiter(sample: str) -> str:
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def _rows(text: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """(row number, cells) of the non-empty rows; a row is a record (quoted cells may
    span lines), numbered from 1."""
    reader = csv.reader(text.splitlines(keepends=True), delimiter=delimiter)
    rows = [(n, [clean_inline(c) for c in row]) for n, row in enumerate(reader, start=1)]
    return [(n, row) for n, row in rows if any(row)]


def _parse(path: Path, delimiter: str | None, fmt: str) -> ParsedDocument:
    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not {fmt}")
    builder = ElementBuilder()
    with parse_errors(path, fmt):
        text = decode_text(data).replace("\r\n", "\n").replace("\r", "\n")
        rows = _rows(text, delimiter or _delimiter(text[:65536]))
        if not rows:
            return finish(path, builder, path.stem)
        (first, header), data_rows = rows[0], rows[1:]
        if looks_like_header(header, [row for _, row in data_rows]):
            where = Location(row_start=first, row_end=first)
            builder.add("heading", " | ".join(c for c in header if c), level=1, location=where)
            for number, row in data_rows:
                pairs = [
                    f"{header[i] if i < len(header) and header[i] else f'Column {i + 1}'}: {v}"
                    for i, v in enumerate(row)
                    if v
                ]
                where = Location(row_start=number, row_end=number)
                builder.add("table", "; ".join(pairs), location=where)
        else:
            for number, row in rows:
                where = Location(row_start=number, row_end=number)
                builder.add("table", " | ".join(c for c in row if c), location=where)
    return finish(path, builder, path.stem, {"rows": len(rows)})


def parse_csv(path: Path) -> ParsedDocument:
    """Parse a .csv file (its delimiter detected)."""
    return _parse(path, "\t" if path.suffix.lower() in (".tsv", ".tab") else None, "CSV")


def parse_tsv(path: Path) -> ParsedDocument:
    """Parse a .tsv/.tab file (tab-separated)."""
    return _parse(path, "\t", "TSV")
