"""A source or config file as a document: its title, then each definition's heading at
the depth it is nested, followed by its code, every piece with its first line."""

from __future__ import annotations

import bisect
import re
import textwrap
from pathlib import Path

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, finish, parse_errors
from flexmatch.inputs.parsing.code.grammars import language_of
from flexmatch.inputs.parsing.code.nesting import check_nesting
from flexmatch.inputs.parsing.code.outline import Definition, outline
from flexmatch.models import Location, ParsedDocument


def _has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _code(source: bytes, start: int, end: int) -> str:
    return textwrap.dedent(source[start:end].decode("utf-8", "replace").expandtabs(4))


class _Lines:
    """Line numbers of byte offsets in one source, from its line breaks found once (a
    count from the start for every piece was quadratic: minutes for a minified file of
    100,000 definitions on one line)."""

    def __init__(self, source: bytes) -> None:
        self._breaks = [match.start() for match in re.finditer(b"\n", source)]

    def at(self, start: int) -> Location:
        """Where code starting at byte ``start`` is: its first line (the builder finds the
        rest from the code's own lines)."""
        return Location(line_start=bisect.bisect_left(self._breaks, start) + 1)


def _add_scope(
    builder: ElementBuilder,
    source: bytes,
    lines: _Lines,
    span: tuple[int, int],
    items: list[Definition],
    depth: int,
    heading: str,
) -> None:
    """The code of one scope (the file, or a class) with its definitions in place."""
    position, first = span[0], True

    def add_gap(end: int) -> None:
        gap = _code(source, position, end)
        if _has_words(gap):
            if not first:  # back in this scope after a definition: say so
                builder.add("title" if depth == 0 else "heading", heading, level=depth)
            builder.add("code", gap, location=lines.at(position))

    for item in items:
        add_gap(item.start)
        first = False
        builder.add("heading", item.label, level=depth + 1, location=lines.at(item.start))
        if item.children:
            inner = (item.start, item.end)
            _add_scope(builder, source, lines, inner, item.children, depth + 1, item.label)
        else:
            code = _code(source, item.start, item.end)
            builder.add("code", code, location=lines.at(item.start))
        position = item.end
    add_gap(span[1])


def parse_code(path: Path) -> ParsedDocument:
    """Parse a source or config file (the grammar chosen by its suffix)."""
    from flexmatch.inputs.parsing.text import decode_text, looks_binary

    language = language_of(path)
    if language is None:
        raise ParseError(f"{path}: no grammar for '{path.suffix}' files")
    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not text")
    source = decode_text(data).replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")
    check_nesting(source.decode("utf-8"), language, str(path))
    builder = ElementBuilder()
    builder.add("title", path.name)
    with parse_errors(path, language):
        found = outline(source, language)
        _add_scope(
            builder, source, _Lines(source), (0, len(source)), found.definitions, 0, path.name
        )
    if not any(e.kind == "code" for e in builder.elements):
        builder.elements.clear()
    return finish(path, builder, path.name, {"language": language}, "no code in the file")
