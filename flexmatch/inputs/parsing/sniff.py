"""What a file holds, from its first bytes: for files whose name says nothing
(``README``, ``copyright``, ``NEWS``, ``README.Debian``, ``lib.so.6``).

A few formats announce themselves (``%PDF-``, an EPUB's ``mimetype`` entry, ``{\\rtf``, an
HTML doctype, roff requests); anything else that is text is read as plain text, and
binary data (NUL bytes, many control characters) is no text at all.

Text that is no prose is recognised by its content too (``not_prose``), whatever its name:
PostScript (``manual.ps.gz``: page-drawing code, its words split into positioned
fragments), symbol tables (``nm`` output, ABI lists, mangled C++ names), minified code or
styles (long lines with hardly a space), generated data on long lines (a search index,
a JSON dump) and base64 or hex dumps. Indexed as text they
cost time and disk and surface in results as operators and mangled names; a folder walk
skips them by that reason, and a setting in ``ingest.parsers`` for the file reads it anyway.
"""

from __future__ import annotations

import re

from flexmatch.inputs.parsing.text import looks_binary

# parsers that read text: a file of theirs that holds binary data is not theirs
TEXT_PARSERS = frozenset({"code", "csv", "email", "html", "man", "markdown", "rst", "text", "tsv"})

_ROFF = re.compile(rb"\A(?:\s*\n)*(?:[.']\\\"|\.TH\s|\.Dd\s|\.so\s)")
_HTML = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*<(?:!doctype\s+html|html[\s>])", re.IGNORECASE)


# what ``not_prose`` recognises → how an error says it
NOT_PROSE: dict[str, str] = {
    "PostScript": "PostScript page code, not its text",
    "symbol table": "a symbol table (linker or ABI symbols), not prose",
    "minified": "minified code (long lines with hardly a space), not prose",
    "encoded data": "encoded data (base64 or hex), not prose",
    "generated data": "generated data on long lines (a search index, a data dump), not prose",
}
NOT_PROSE_SAMPLE = 65536  # bytes read to decide
# the parsers whose text ``not_prose`` checks: HTML keeps its words however it is
# packed, man pages and tables are text by their format
PROSE_PARSERS = frozenset({"code", "markdown", "rst", "text"})

_POSTSCRIPT = re.compile(rb"\A(?:\xef\xbb\xbf)?[\x04\s]*%!")
_SYMBOL_LINE = re.compile(
    r"""^\s*(?:
        (?:[0-9a-fA-F]{8,16}|\ {8,16})\ [A-Za-z?]\ \S+$        # nm, System.map
      | (?:FUNC|OBJECT|TLS|NOTYPE|IFUNC|COMMON):\S+$          # an ABI list
      | \S*_Z[A-Za-z0-9_]{4,}\S*(?:\s+\S+)?$                  # a mangled name (and version)
      | \S+@@?(?:Base|[A-Z][A-Z0-9]*_[0-9][0-9.]*)(?:\s+\S+)?$  # a versioned symbol
    )""",
    re.VERBOSE,
)
_ENCODED_LINE = re.compile(r"^\s*(?:[A-Za-z0-9+/]{48,}={0,2}|(?:[0-9a-fA-F]{2}\s?){24,})\s*$")
_LONG_LINE = 1000
_DATA = re.compile(r'[\[\]{}",:0-9]')  # what data on one long line is mostly made of


def not_prose(sample: bytes) -> str | None:
    """Why text starting with ``sample`` is no prose to index (a key of ``NOT_PROSE``),
    or None. Each test needs most of the sample to fit, so prose that quotes a symbol,
    a long line or a key is never taken for one."""
    if _POSTSCRIPT.match(sample):
        return "PostScript"
    text = sample.decode("utf-8", errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    if len(lines) > 1 and len(sample) == NOT_PROSE_SAMPLE:
        lines = lines[:-1]  # the sample may cut the last line
    head = lines[:300]
    if len(head) >= 20:
        if sum(1 for line in head if _SYMBOL_LINE.match(line)) >= 0.6 * len(head):
            return "symbol table"
        if sum(1 for line in head if _ENCODED_LINE.match(line)) >= 0.6 * len(head):
            return "encoded data"
    long = [line for line in lines if len(line) >= _LONG_LINE]
    long_chars = sum(len(line) for line in long)
    if long and long_chars >= 0.8 * sum(len(line) for line in lines):
        spaces = sum(line.count(" ") + line.count("\t") for line in long)
        if spaces < 0.04 * long_chars:
            return "minified"
        if sum(len(_DATA.findall(line)) for line in long) >= 0.3 * long_chars:
            return "generated data"
    return None


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
