"""Excel workbooks (.xlsx/.xlsm) via openpyxl in read-only mode, cached values only.

Each sheet becomes a heading (the sheet name) and a table. When a header row is found,
every data row is written as "Header: value; Header: value", so a single retrieved line
still says what each number means. Single-cell rows above the header (captions) are kept
as paragraphs unless they only repeat the sheet name.
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
from flexmatch.models import ParsedDocument


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


def _sheet_lines(rows: list[list[str]]) -> tuple[list[str], list[str]]:
    """(caption lines, table lines) for the non-empty rows of a sheet."""
    # Up to three single-cell rows before the first wider row are captions (titles).
    start = next((i for i, row in enumerate(rows[:4]) if sum(1 for c in row if c) > 1), 0)
    captions = [next(c for c in row if c) for row in rows[:start]]
    header, data = rows[start], rows[start + 1 :]
    if not _looks_like_header(header, data):
        lines = [" | ".join(c for c in row if c) for row in rows[start:]]
        return captions, lines
    lines = []
    for row in data:
        pairs = []
        for i, value in enumerate(row):
            if not value:
                continue
            label = header[i] if i < len(header) and header[i] else f"Column {i + 1}"
            pairs.append(f"{label}: {value}")
        lines.append("; ".join(pairs))
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
                rows = [[_cell(v) for v in row] for row in sheet.iter_rows(values_only=True)]
                rows = [row for row in rows if any(row)]
                if not rows:
                    continue
                sheets.append(sheet.title)
                builder.add("heading", sheet.title, level=1)
                captions, lines = _sheet_lines(rows)
                for caption in captions:
                    if caption.strip().lower() != sheet.title.strip().lower():
                        builder.add("paragraph", caption)
                builder.add("table", "\n".join(lines))
            book_title = meaningful_title(workbook.properties.title)
        finally:
            workbook.close()
    return finish(path, builder, book_title or path.stem, {"sheets": sheets})
