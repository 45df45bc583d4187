"""What a file holds, from its first bytes: for files whose name says nothing
(``README``, ``copyright``, ``NEWS``, ``README.Debian``, ``lib.so.6``).

A few formats announce themselves (``%PDF-``, an EPUB's ``mimetype`` entry, ``{\\rtf``, an
HTML doctype, roff requests); anything else that is text is read as plain text, and
binary data (NUL bytes, many control characters) is no text at all.
"""

from __future__ import annotations

import re

from flexmatch.inputs.parsing.text import looks_binary

# parsers that read text: a file of theirs that holds binary data is not theirs
TEXT_PARSERS = frozenset({"code", "csv", "email", "html", "man", "markdown", "rst", "text", "tsv"})

_ROFF = re.compile(rb"\A(?:\s*\n)*(?:[.']\\\"|\.TH\s|\.Dd\s|\.so\s)")
_HTML = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*<(?:!doctype\s+html|html[\s>])", re.IGNORECASE)


def is_binary(head: bytes) -> bool:
    """True when the first bytes of a file are not text."""
    return looks_binary(head)


def sniff(head: bytes) -> str | None:
    """The parser for a file starting with ``head``; None for binary data no parser reads."""
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "epub" if head[30:58] == b"mimetypeapplication/epub+zip" else None
    if head.startswith(b"{\\rtf"):
        return "rtf"
    if is_binary(head):
        return None
    if _ROFF.match(head):
        return "man"
    if _HTML.match(head):
        return "html"
    return "text"
