"""Plain-text files: blank lines separate paragraphs, bullet lines become list items.

Text files carry no declared encoding, so UTF-8 is tried first and cp1252 / latin-1 are
the fallbacks; files that are clearly binary are refused instead of producing garbage.
"""

from __future__ import annotations

import re
from pathlib import Path

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, finish, parse_errors, split_list_lines
from flexmatch.models import ParsedDocument

_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


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


def add_text_blocks(builder: ElementBuilder, text: str) -> None:
    """Add paragraphs (split on blank lines) and bullet list items from plain text."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n\n")
    for block in _BLANK_LINE.split(text):
        for kind, content in split_list_lines(block.split("\n")):
            builder.add(kind, content)


def parse_text_file(path: Path) -> ParsedDocument:
    """Parse a .txt/.text/.log file."""
    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not text")
    builder = ElementBuilder()
    with parse_errors(path, "text"):
        add_text_blocks(builder, decode_text(data))
    return finish(path, builder, path.stem)
