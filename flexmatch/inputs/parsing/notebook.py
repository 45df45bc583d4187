"""Jupyter notebooks (.ipynb): markdown cells as Markdown, code cells as code, and their
text outputs (streams, results, errors) as text, in cell order.

A notebook is JSON (nbformat 4, and the list-of-lines form of version 3's cells), read
as plain JSON: nbformat would add a dependency for a schema this reader only needs the
``cells`` of. Images and HTML outputs are left out: their text/plain form, when there is
one, is kept instead. Its file lines are JSON, not the cell's, so elements carry none.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, finish, parse_errors
from flexmatch.inputs.parsing.markdown import markdown_to_builder
from flexmatch.models import ParsedDocument

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # colours in tracebacks


def _source(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return value if isinstance(value, str) else ""


def _output_text(output: dict[str, Any]) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        return _source(output.get("text"))
    if kind in ("execute_result", "display_data"):
        data = output.get("data") or {}
        return _source(data.get("text/plain")) if isinstance(data, dict) else ""
    if kind == "error":
        lines = [_source(line) for line in output.get("traceback") or []]
        text = "\n".join(lines) or f"{output.get('ename', '')}: {output.get('evalue', '')}"
        return _ANSI.sub("", text)
    return ""


def _cells(notebook: Any) -> list[dict[str, Any]]:
    if not isinstance(notebook, dict):
        return []
    cells = notebook.get("cells")
    if cells is None:  # nbformat 3: cells inside worksheets
        cells = [c for w in notebook.get("worksheets") or [] for c in w.get("cells") or []]
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


def parse_notebook(path: Path) -> ParsedDocument:
    """Parse a Jupyter notebook (.ipynb)."""
    try:
        notebook = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ParseError(f"{path}: not a readable notebook (JSON): {exc}") from None
    builder = ElementBuilder()
    language = ""
    with parse_errors(path, "notebook"):
        if isinstance(notebook, dict):
            info = (notebook.get("metadata") or {}).get("language_info") or {}
            language = str(info.get("name", "")) if isinstance(info, dict) else ""
        for cell in _cells(notebook):
            kind = cell.get("cell_type")
            text = _source(cell.get("source", cell.get("input")))
            if kind == "markdown":
                cell_builder, _ = markdown_to_builder(text, lines=False)
                builder.elements.extend(cell_builder.elements)
            elif kind == "code":
                builder.add("code", text)
                for output in cell.get("outputs") or []:
                    if isinstance(output, dict):
                        builder.add("code", _output_text(output))
            elif kind == "raw":
                builder.add("paragraph", text)
    heading = next((e.text for e in builder.elements if e.kind == "heading"), "")
    metadata = {"language": language} if language else {}
    return finish(path, builder, heading or path.stem, metadata)
