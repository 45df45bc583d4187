"""Markdown files via markdown-it-py tokens, so structure comes from a real CommonMark parser.

Indented code blocks are switched off: many ``.md`` files are plain text with indented
paragraphs (licences, notes) and would otherwise turn into one long "code" element;
fenced code blocks still become ``code`` elements. List items keep their Markdown
markers and nesting (``- ``, ``3. `` numbered from the list's start, a nested item
indented under its parent's text; ``ListMarkers``), so a chunk reads as the list.
Every element has its lines in the file (from the parser's own line map), so a result
cites ``README.md:40-52``.
"""

from __future__ import annotations

import copy
import functools
import html
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, clean_inline, finish, parse_errors
from flexmatch.models import Element, Location, ParsedDocument

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

_FRONT_MATTER = re.compile(r"\A---[^\S\n]*\n(.*?\n)(?:---|\.\.\.)[^\S\n]*(?:\n|\Z)", re.DOTALL)
_FRONT_TITLE = re.compile(r"^title:\s*(.+?)\s*$", re.MULTILINE)
_TAG = re.compile(r"<!--.*?-->|<[^>]+>", re.DOTALL)


def _inline_text(token: Token) -> str:
    """Plain text of an inline token: markup dropped, link text and image alt kept."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(_inline_text(child))
        elif child.type == "html_inline" and child.content.lower().startswith("<br"):
            parts.append(" ")
    return "".join(parts)


def _strip_front_matter(text: str) -> tuple[str, str]:
    """Remove a YAML front-matter block; return (body, title found in it or "")."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return text, ""
    title = _FRONT_TITLE.search(match.group(1))
    value = title.group(1).strip("'\"") if title else ""
    return text[match.end() :], value


@functools.cache
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").disable("code")


def markdown_to_builder(text: str, lines: bool = True) -> tuple[ElementBuilder, str]:
    """Parse markdown text into elements; also return the title from front matter, if any.
    ``lines``: give each element its lines (False for a text that is not a file's)."""
    body, front_title = _strip_front_matter(text)
    offset = text[: len(text) - len(body)].count("\n")  # lines of the front matter
    tokens = _markdown().parse(body)
    builder = ElementBuilder()

    def span(token: Token, skip: int = 0) -> Location | None:
        """The lines of ``token``'s block (``skip``: leading lines that are not its text)."""
        if not token.map or not lines:
            return None
        first, end = token.map
        return Location(line_start=offset + first + 1 + skip, line_end=offset + max(end, first + 1))

    table_open: Token | None = None
    heading_level = 0
    table_rows: list[list[str]] | None = None
    # One entry per open list, outermost first: [ordered, next number, the item's text
    # indent (0 until its marker is written), its marker still to write].
    lists: list[list[Any]] = []
    for token in tokens:
        kind = token.type
        if kind == "heading_open":
            heading_level = int(token.tag[1:])
        elif kind == "heading_close":
            heading_level = 0
        elif kind in ("bullet_list_open", "ordered_list_open"):
            start = token.attrGet("start")
            lists.append([kind == "ordered_list_open", int(start or 1), 0, False])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif kind == "list_item_open" and lists:
            lists[-1][3] = True
        elif kind == "table_open":
            table_rows, table_open = [], token
        elif kind == "table_close":
            if table_rows is not None:
                where = span(table_open) if table_open else None
                text = "\n".join(" | ".join(row) for row in table_rows)
                _keep_lists(
                    builder,
                    bool(lists),
                    functools.partial(builder.add, "table", text, location=where),
                )
            table_rows = None
        elif kind == "tr_open" and table_rows is not None:
            table_rows.append([])
        elif kind == "inline":
            content = _inline_text(token)
            if table_rows is not None:
                if table_rows and content.strip():
                    table_rows[-1].append(content.strip())
            elif heading_level:
                builder.add("heading", content, level=heading_level, location=span(token))
            elif lists:
                _add_item_text(builder, lists, content, span(token))
            else:
                builder.add("paragraph", content, location=span(token))
        elif kind in ("fence", "code_block"):
            where = span(token, kind == "fence")
            _keep_lists(
                builder,
                bool(lists),
                functools.partial(builder.add, "code", token.content, location=where),
            )
        elif kind == "html_block":
            block = html.unescape(_TAG.sub(" ", token.content))
            builder.add("paragraph", block, location=span(token))
    return builder, front_title


def _add_item_text(
    builder: ElementBuilder, lists: list[list[Any]], content: str, where: Location | None
) -> None:
    """Text inside a list: an item's first paragraph gets its Markdown marker and indent
    (``- ``, ``3. ``, nested under its parent's text), a later paragraph of the same item
    the item's indent, so a chunk reads as the list it came from."""
    ordered, number, indent, needs_marker = lists[-1]
    text = clean_inline(content)
    if not text:
        return
    if needs_marker:
        builder.add_list_item(text, len(lists) - 1, ordered, number if ordered else None, where)
        lists[-1][1:] = [
            number + 1 if ordered else number,
            len(builder.elements[-1].text) - len(text),
            False,
        ]
        return
    builder.elements.append(Element(kind="list_item", text=" " * indent + text, location=where))


def _keep_lists(builder: ElementBuilder, in_list: bool, add: Callable[[], None]) -> None:
    """Add a block (code, a table); inside a list, without ending the lists around it, so
    an item after a code block in a list keeps its nesting."""
    markers = copy.deepcopy(builder.lists)
    add()
    if in_list:
        builder.lists = markers


def parse_markdown(path: Path) -> ParsedDocument:
    """Parse a .md/.markdown file."""
    from flexmatch.inputs.parsing.text import decode_text, looks_binary

    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not text")
    with parse_errors(path, "Markdown"):
        builder, front_title = markdown_to_builder(decode_text(data))
    h1 = next((e.text for e in builder.elements if e.kind == "heading" and e.level == 1), "")
    return finish(path, builder, front_title or h1 or path.stem)
