"""OpenDocument text (.odt) via odfpy, walking ``office:text`` in document order.

``text:h`` carries its own outline level, so headings need no style lookup. Tables of
contents and indexes are skipped: they only repeat the headings.
"""

from __future__ import annotations

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

_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
_SKIPPED = {
    (_TEXT, "sequence-decls"),
    (_TEXT, "tracked-changes"),
    (_TEXT, "table-of-content"),
    (_TEXT, "alphabetical-index"),
    (_TEXT, "illustration-index"),
    (_TEXT, "table-index"),
    (_TEXT, "object-index"),
    (_TEXT, "user-index"),
    (_TEXT, "bibliography"),
    (_TEXT, "soft-page-break"),
}


def _text(node: Any) -> str:
    from odf import teletype

    return str(teletype.extractText(node))


def _elements(node: Any) -> list[Any]:
    return [c for c in node.childNodes if c.nodeType == c.ELEMENT_NODE]


def _rows(table: Any) -> list[Any]:
    """The table's rows, including those in header/row groups but not in nested tables."""
    rows = []
    for child in _elements(table):
        if child.qname == (_TABLE, "table-row"):
            rows.append(child)
        elif child.qname[0] == _TABLE and child.qname[1] != "table":
            rows.extend(_rows(child))
    return rows


def _table(table: Any) -> str:
    lines = []
    for row in _rows(table):
        cells = []
        for cell in _elements(row):
            if cell.qname != (_TABLE, "table-cell"):
                continue  # covered (merged) cells hold nothing new
            parts = [_text(c) for c in _elements(cell) if c.qname != (_TABLE, "table")]
            parts += [
                "[" + "; ".join(_table(t).split("\n")) + "]"
                for t in _elements(cell)
                if t.qname == (_TABLE, "table")
            ]
            text = clean_inline(" ".join(parts))
            if text:
                cells.append(text)
        if cells:
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def _numbered_lists(document: Any) -> set[tuple[str, int]]:
    """(list style name, level) pairs whose items are numbered (``list-level-style-number``;
    the others are bullets), from the document's automatic and common styles."""
    numbered: set[tuple[str, int]] = set()
    for styles in (document.automaticstyles, document.styles):
        for style in _elements(styles) if styles is not None else []:
            if style.qname != (_TEXT, "list-style"):
                continue
            name = str(style.attributes.get((_STYLE, "name")) or "")
            for level_style in _elements(style):
                level = str(level_style.attributes.get((_TEXT, "level")) or "")
                if level_style.qname == (_TEXT, "list-level-style-number") and level.isdigit():
                    numbered.add((name, int(level)))
    return numbered


class _ListState:
    """Where the walk is in nested ``text:list``s: depth (0: not in a list) and the list
    style (named on the outermost list, inherited by the lists inside it)."""

    def __init__(self, numbered: set[tuple[str, int]], depth: int = 0, style: str = "") -> None:
        self.numbered, self.depth, self.style = numbered, depth, style

    def inner(self, node: Any) -> _ListState:
        style = str(node.attributes.get((_TEXT, "style-name")) or "") or self.style
        return _ListState(self.numbered, self.depth + 1, style)


def _walk(node: Any, builder: ElementBuilder, lists: _ListState) -> None:
    for child in _elements(node):
        qname = child.qname
        if qname in _SKIPPED:
            continue
        if qname == (_TEXT, "h"):
            level = child.attributes.get((_TEXT, "outline-level"))
            level = int(level) if level and str(level).isdigit() else 1
            builder.add("heading", _text(child), level=level)
        elif qname == (_TEXT, "p") and lists.depth:  # "- "/"1. " by the list's style
            ordered = (lists.style, lists.depth) in lists.numbered
            builder.add_list_item(_text(child), lists.depth - 1, ordered)
        elif qname == (_TEXT, "p"):
            builder.add("paragraph", _text(child))
        elif qname == (_TEXT, "list"):
            _walk(child, builder, lists.inner(child))
        elif qname == (_TABLE, "table"):
            builder.add("table", _table(child))
        else:  # sections, list items, frames, text boxes ...
            _walk(child, builder, lists)


def parse_odt(path: Path) -> ParsedDocument:
    """Parse an .odt file."""
    from odf import dc
    from odf.opendocument import load

    builder = ElementBuilder()
    with parse_errors(path, "OpenDocument text (.odt)"):
        document = load(str(path))
        _walk(document.text, builder, _ListState(_numbered_lists(document)))
        titles = document.meta.getElementsByType(dc.Title) if document.meta else []
        meta_title = meaningful_title(_text(titles[0])) if titles else ""
    title = meta_title or builder.first_text("heading")
    return finish(path, builder, title or path.stem)
