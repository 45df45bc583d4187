"""Plain-text files: blank lines separate paragraphs, bullet lines become list items, and
an underlined line (``Title`` over ``=====``, ``Usage`` over ``-----``, also with the same
line above it) that starts a paragraph is a heading, as READMEs and NEWS files write them.
Its level comes from the order the underline styles first appear in, as in
reStructuredText; the underline is at least 3 characters and half the title's length, so a
rule under a long sentence is not a heading.

Text files carry no declared encoding, so UTF-8 is tried first and cp1252 / latin-1 are
the fallbacks; files that are clearly binary are refused instead of producing garbage.
"""

from __future__ import annotations

import re
from pathlib import Path

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import (
    ElementBuilder,
    finish,
    parse_errors,
    split_list_line_spans,
)
from flexmatch.models import Location, ParsedDocument

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_UNDERLINE = re.compile(r"^ {0,3}([=\-~^*+#])\1{2,}\s*$")
_HEADING_CHARS = 120  # a longer "title" is a paragraph over a rule


def decode_text(data: bytes) -> str:
    """Decode bytes of unknown encoding: BOM, then UTF-8, then cp1252, then latin-1."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="replace")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    for encoding in ("utf-8", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


def looks_binary(data: bytes) -> bool:
    """True for data with NUL bytes or many control characters (not text)."""
    sample = data[:8192]
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False  # UTF-16 text legitimately contains NUL bytes
    if b"\x00" in sample:
        return True
    if not sample:
        return False
    text = sample.decode("latin-1")
    return len(_CONTROL.findall(text)) / len(text) > 0.05


def add_text_blocks(builder: ElementBuilder, text: str, first_line: int | None = 1) -> None:
    """Add paragraphs (split on blank lines and page breaks) and bullet list items from
    plain text, each with its lines (``first_line`` is the number of ``text``'s first; None
    when ``text`` is not a file's, and its lines would cite nothing)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    block: list[tuple[int, str]] = []  # (line number, text) of the block being read
    styles: list[tuple[str, bool]] = []  # underline styles (character, overlined) seen

    def flush() -> None:
        heading = _underlined(block)
        if heading is not None:
            title, style, used = heading
            if style not in styles:
                styles.append(style)
            where = None
            if first_line is not None:
                where = Location(line_start=block[0][0], line_end=block[used - 1][0])
            builder.add("heading", title, level=styles.index(style) + 1, location=where)
            del block[:used]
        numbers = [number for number, _ in block]
        for kind, content, first, last in split_list_line_spans([line for _, line in block]):
            where = None
            if first_line is not None:
                where = Location(line_start=numbers[first], line_end=numbers[last])
            builder.add(kind, content, location=where)
        block.clear()

    for number, line in enumerate(lines, start=first_line or 1):
        parts = line.split("\f")  # a page break ends a paragraph, even inside a line
        for i, part in enumerate(parts):
            if i:
                flush()
            if part.strip():
                block.append((number, part))
            else:
                flush()
    flush()


def _underlined(block: list[tuple[int, str]]) -> tuple[str, tuple[str, bool], int] | None:
    """The heading a block starts with (``Title`` over ``=====``, or between two such
    lines): its text, its underline style and how many lines it takes; None if none."""
    texts = [text for _, text in block]
    over = _UNDERLINE.match(texts[0]) if texts else None
    start = 1 if over else 0
    if len(texts) < start + 2:
        return None
    title, under = texts[start].strip(), _UNDERLINE.match(texts[start + 1])
    if (
        under is None
        or _UNDERLINE.match(texts[start])
        or not any(ch.isalnum() for ch in title)
        or len(title) > _HEADING_CHARS
        or len(texts[start + 1].strip()) < max(3, len(title) // 2)
        or (over is not None and over[1] != under[1])
    ):
        return None
    return title, (under[1], over is not None), start + 2


def parse_text_file(path: Path) -> ParsedDocument:
    """Parse a .txt/.text/.log file."""
    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not text")
    builder = ElementBuilder()
    with parse_errors(path, "text"):
        add_text_blocks(builder, decode_text(data))
    return finish(path, builder, path.stem)
