"""Excel workbooks (.xlsx/.xlsm) via openpyxl in read-only mode, cached values only.

Each sheet becomes a heading (the sheet name) and its rows, one table element per row
located by its sheet and row number (so a chunk cites ``sales.xlsx › Q3 rows 2-40``).
When a header row is found, every data row is written as "Header: value; Header: value",
so a single retrieved line still says what each number means. Single-cell rows above the
header (captions) are kept as paragraphs unless they only repeat the sheet name.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from flexmatch.inputs.parsing._common import (
    ElementBuilder,
    clean_inline,
    finish,
    meaningful_title,
    parse_errors,
)
from flexmatch.models import Location, ParsedDocument


def _cell(value: Any) -> str:
    """Display text of a cell value (integral floats without ".0", dates in ISO form)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ").removesuffix(" 00:00:00")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return clean_inline(str(value))


def _looks_like_header(row: list[str], data: list[list[str]]) -> bool:
    """Two or more distinct, non-numeric labels, followed by at least one data row."""
    labels = [c for c in row if c]
    if len(labels) < 2 or len(set(labels)) != len(labels) or not data:
        return False
    return all(not _is_number(c) and len(c) <= 80 for c in labels)


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


Line = tuple[int, str]  # a row's number in its sheet, and its text


def _sheet_lines(rows: list[list[str]], numbers: list[int]) -> tuple[list[Line], list[Line]]:
    """(caption lines, table lines) for the non-empty rows of a sheet (``numbers``: their
    row numbers)."""
    # Up to three single-cell rows before the first wider row are captions (titles).
    start = next((i for i, row in enumerate(rows[:4]) if sum(1 for c in row if c) > 1), 0)
    captions = [(numbers[i], next(c for c in row if c)) for i, row in enumerate(rows[:start])]
    header, data = rows[start], rows[start + 1 :]
    if not _looks_like_header(header, data):
        lines = [
            (numbers[start + i], " | ".join(c for c in row if c))
            for i, row in enumerate(rows[start:])
        ]
        return captions, lines
    lines = []
    for number, row in zip(numbers[start + 1 :], data, strict=True):
        pairs = []
        for i, value in enumerate(row):
            if not value:
                continue
            label = header[i] if i < len(header) and header[i] else f"Column {i + 1}"
            pairs.append(f"{label}: {value}")
        lines.append((number, "; ".join(pairs)))
    return captions, lines


def parse_xlsx(path: Path) -> ParsedDocument:
    """Parse an .xlsx/.xlsm file, one heading + table per non-empty sheet."""
    import openpyxl

    builder = ElementBuilder()
    with parse_errors(path, "Excel (.xlsx)"):
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
        try:
            sheets = []
            for sheet in workbook.worksheets:
                numbered = [  # iter_rows starts at row 1 and fills in missing rows
                    (number, [_cell(v) for v in row])
                    for number, row in enumerate(sheet.iter_rows(values_only=True), start=1)
                ]
                numbered = [(number, row) for number, row in numbered if any(row)]
                if not numbered:
                    continue
                sheets.append(sheet.title)
                builder.add("heading", sheet.title, level=1, location=Location(sheet=sheet.title))
                numbers, rows = [n for n, _ in numbered], [row for _, row in numbered]
                captions, lines = _sheet_lines(rows, numbers)
                for number, caption in captions:
                    if caption.strip().lower() != sheet.title.strip().lower():
                        where = Location(sheet=sheet.title, row_start=number, row_end=number)
                        builder.add("paragraph", caption, location=where)
                for number, line in lines:
                    where = Location(sheet=sheet.title, row_start=number, row_end=number)
                    builder.add("table", line, location=where)
            book_title = meaningful_title(workbook.properties.title)
        finally:
            workbook.close()
    return finish(path, builder, book_title or path.stem, {"sheets": sheets})
