"""reStructuredText files via docutils' own parser: sections become headings, lists list
items (nested and numbered), literal and code blocks code, tables rows, each with its
lines in the file.

Sphinx documents use roles and directives docutils does not know (``:func:``,
``.. versionadded::``, ``.. autofunction::``): they never fail a file. An unknown role
keeps its text (``:func:`os.path.join``` → ``os.path.join``), an unknown directive its
arguments and content. Nothing is read outside the file: ``include`` and ``raw`` are
switched off, and docutils' messages are silenced (a file with mistakes still reads).
"""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, finish, parse_errors, table_text
from flexmatch.inputs.parsing.text import decode_text, looks_binary
from flexmatch.models import ElementKind, Location, ParsedDocument

if TYPE_CHECKING:
    from docutils import nodes

_ROLE = re.compile(r"^:[\w.:+-]+:`(.*)`$", re.DOTALL)
_TARGET = re.compile(r"\s*<[^<>]*>$")
_DIRECTIVE = re.compile(r"^\.\.\s+([\w:.+-]+)::[^\S\n]*(.*)$")
_SKIPPED = frozenset(
    {
        "comment",
        "substitution_definition",
        "target",
        "raw",
        "image",
        "figure_image",
        "transition",
        "pending",
        "decoration",
        "footnote_reference",
        "citation_reference",
    }
)
_NOT_CONTENT = frozenset({"include", "raw", "toctree", "highlight", "index", "only", "meta"})
_SETTINGS = {
    "report_level": 5,  # silent: a file with mistakes still reads
    "halt_level": 5,
    "file_insertion_enabled": False,  # no include, no csv-table :file:
    "raw_enabled": False,
    "input_encoding": "unicode",
    "syntax_highlight": "none",
    "line_length_limit": 100_000,
}


def _role_text(raw: str) -> str:
    """The text an unknown role shows: ``:ref:`Title <target>``` → ``Title``."""
    match = _ROLE.match(raw.strip())
    if not match:
        return raw
    text = match.group(1)
    shown = _TARGET.sub("", text) if not text.startswith("<") else text.strip("<>")
    return shown.lstrip("~!")


def _inline(node: nodes.Node) -> str:
    """A paragraph-like node's text, unknown roles reduced to their text."""
    from docutils import nodes as n

    if isinstance(node, n.Text):
        return str(node)
    if isinstance(node, n.problematic):
        return _role_text(node.astext())
    if isinstance(node, n.footnote_reference | n.citation_reference):
        return ""
    return "".join(_inline(child) for child in node.children)


def _lines(node: nodes.Node, *, heading: bool = False) -> Location | None:
    line = getattr(node, "line", None)
    if not isinstance(line, int) or line < 1:
        return None
    raw = str(getattr(node, "rawsource", "") or "")
    if heading:  # docutils gives a title its underline
        return Location(line_start=max(1, line - 1), line_end=max(1, line - 1))
    return Location(line_start=line, line_end=line + raw.rstrip("\n").count("\n"))


class _Reader:
    def __init__(self, offset: int, source: str) -> None:
        self.builder = ElementBuilder()
        self.offset = offset  # a document title makes sections one level deeper
        self.source = source.split("\n")

    def add(self, kind: ElementKind, text: str, node: Any, level: int = 0) -> None:
        where = _lines(node, heading=kind == "heading")
        if kind == "code" and where is not None:
            where = self.code_lines(text, where)
        self.builder.add(kind, text, level=level, location=where)

    def code_lines(self, text: str, where: Location) -> Location:
        """A directive's code block is given a line past its content: find its first
        line in the source, a few lines up."""
        first = text.split("\n", 1)[0].strip()
        start = where.line_start or 1
        for number in range(min(start, len(self.source)), max(0, start - 8), -1):
            if first and self.source[number - 1].strip() == first:
                return Location(line_start=number, line_end=number + text.count("\n"))
        return where

    def walk(self, node: nodes.Node, depth: int) -> None:
        from docutils import nodes as n

        for child in node.children:
            self.element(child, depth, n)

    def element(self, node: Any, depth: int, n: Any) -> None:
        name = node.tagname
        if name in _SKIPPED:
            return
        if isinstance(node, n.section):
            self.walk(node, depth + 1)
        elif isinstance(node, n.title):
            if isinstance(node.parent, n.section | n.document):
                level = min(6, max(1, depth + self.offset))
                self.add("heading", _inline(node), node, level)
            else:  # the title of an admonition, a topic, a table
                self.add("paragraph", _inline(node), node)
        elif isinstance(
            node, n.paragraph | n.line | n.attribution | n.caption | n.term | n.subtitle | n.rubric
        ):
            self.add("paragraph", _inline(node), node)
        elif isinstance(node, n.literal_block | n.doctest_block):
            self.add("code", node.astext(), node)
        elif isinstance(node, n.bullet_list | n.enumerated_list):
            self.list(node, depth, n)
        elif isinstance(node, n.table):
            self.table(node, n)
        elif isinstance(node, n.field):
            field_name, body = node.children[0], node.children[1]
            self.add("paragraph", f"{_inline(field_name)}: {_inline_block(body)}", node)
        elif isinstance(node, n.system_message):
            self.unknown_directive(node, n)
        elif isinstance(node, n.Text):
            self.add("paragraph", str(node), node.parent)
        else:  # containers: sections' bodies, admonitions, quotes, definitions, topics
            self.walk(node, depth)

    def list(self, node: Any, depth: int, n: Any) -> None:
        numbered = isinstance(node, n.enumerated_list)
        start = int(node.get("start", 1) or 1)
        for number, item in enumerate(node.children, start=start):
            if not isinstance(item, n.list_item):
                continue
            first, *rest = item.children or [None]
            marker = f"{number}. " if numbered else ""
            if isinstance(first, n.paragraph):
                self.add("list_item", marker + _inline(first), first)
            elif first is not None:
                rest = [first, *rest]
            for child in rest:
                self.element(child, depth, n)

    def table(self, node: Any, n: Any) -> None:
        rows = [
            [_inline_block(entry) for entry in row.children if isinstance(entry, n.entry)]
            for row in node.findall(n.row)
        ]
        text = table_text(rows)
        if text:
            self.add("table", text, node)

    def unknown_directive(self, node: Any, n: Any) -> None:
        """An unknown directive keeps its arguments and content; docutils' message goes."""
        for block in node.findall(n.literal_block):
            first, _, body = block.astext().partition("\n")
            match = _DIRECTIVE.match(first)
            if match is None or match.group(1).split(":")[-1] in _NOT_CONTENT:
                continue
            lines = [line for line in body.split("\n") if not re.match(r"^\s*:[\w-]+:", line)]
            content = textwrap.dedent("\n".join(lines)).strip()
            text = " ".join(part for part in (match.group(2).strip(), content) if part)
            where = Location(line_start=node.line) if isinstance(node.line, int) else None
            if text:
                self.builder.add("paragraph", text, location=where)


def _inline_block(node: Any) -> str:
    """The text of a block (a table cell, a field body): its paragraphs joined."""
    return " ".join(_inline(child) for child in node.children) if node.children else ""


def rst_to_builder(text: str) -> tuple[ElementBuilder, str]:
    """Elements of reStructuredText, and its document title ("" if none)."""
    from docutils import nodes
    from docutils.core import publish_doctree

    settings = {**_SETTINGS, "warning_stream": io.StringIO()}
    tree = publish_doctree(text, settings_overrides=settings)
    title = next((c for c in tree.children if isinstance(c, nodes.title)), None)
    reader = _Reader(offset=1 if title is not None else 0, source=text)
    reader.walk(tree, 0)
    return reader.builder, _inline(title) if title is not None else ""


def parse_rst(path: Path) -> ParsedDocument:
    """Parse a .rst/.rest file."""
    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not reStructuredText")
    with parse_errors(path, "reStructuredText"):
        builder, title = rst_to_builder(decode_text(data))
    heading = builder.first_text("heading")
    return finish(path, builder, title or heading or path.stem)
