"""Man pages (roff, ``.1``–``.9`` and gzipped), rendered by groff, read by their layout.

groff (Debian's ``groff-base``, on every Debian system that has ``man``) is the roff
reader: it runs every macro, escape, font and ``tbl`` table the way ``man`` shows them,
where a Python roff reader would handle a subset. Its plain-text rendering is regular: a
section heading (``NAME``, ``SYNOPSIS``…) starts at column 0, a subsection at column 3,
body text deeper, and blank lines separate paragraphs; that is read back into headings,
paragraphs and list items. The page's title is its NAME line (``ls - list directory
contents``). Rendered lines do not map to the source's lines, so elements carry none.

A page that only points to another one (``.so man3/other.3``) has no text of its own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from flexmatch.errors import EmptyDocumentError, MissingExtraError, ParseError
from flexmatch.inputs.parsing._common import (
    ElementBuilder,
    clean_inline,
    finish,
    parse_errors,
    split_list_lines,
)
from flexmatch.inputs.parsing.text import add_text_blocks, decode_text, looks_binary
from flexmatch.models import ParsedDocument

_COMMAND = [
    "groff",
    "-t",  # tbl tables
    "-Kutf-8",  # the input is given as UTF-8 (decoded here)
    "-mandoc",  # man(7) or mdoc(7), whichever the page is written in
    "-Tutf8",
    "-P-cbou",  # plain text: no escape sequences, no overstriking
    "-rLL=250n",  # long lines: a paragraph is rarely wrapped
    "-rHY=0",  # no hyphenation
    "-dAD=l",  # no justification spaces
]
_SO_ONLY = re.compile(r"\A(?:\s*(?:[.']\\\".*)?\n)*\s*\.so\s+(\S+)\s*\Z")
_MACROS = re.compile(r"^[.'][ \t]*(?:TH|SH|Dd|Sh)\b", re.MULTILINE)
_SECTION_INDENT = 0
_SUBSECTION_INDENT = 3
TIMEOUT = 60.0


def render(text: str, label: Path | str) -> str:
    """groff's plain-text rendering of a man page."""
    groff = shutil.which("groff")
    if groff is None:
        raise MissingExtraError(
            f"{label}: reading man pages needs groff (Debian/Ubuntu: apt-get install groff-base)"
        )
    env = {**os.environ, "GROFF_NO_SGR": "1", "LC_ALL": "C.UTF-8"}
    try:
        done = subprocess.run(
            [groff, *_COMMAND[1:]],
            input=text.encode("utf-8"),
            capture_output=True,
            timeout=TIMEOUT,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ParseError(f"{label}: groff took longer than {TIMEOUT:g}s") from None
    if done.returncode != 0 and not done.stdout.strip():
        reason = clean_inline(done.stderr.decode("utf-8", "replace"))[:200]
        raise ParseError(f"{label}: groff could not render the man page: {reason}")
    return done.stdout.decode("utf-8", "replace")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def rendered_to_builder(rendered: str) -> tuple[ElementBuilder, str]:
    """Headings, paragraphs and list items of a rendered page, and its NAME line."""
    lines = rendered.replace("\u2010", "-").split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) > 2:  # the running header and footer (``LS(1) ... LS(1)``)
        lines = lines[filled[0] + 1 : filled[-1]]
    builder = ElementBuilder()
    section = ""
    name = ""
    block: list[str] = []

    def flush() -> None:
        nonlocal name
        for kind, content in split_list_lines([line.strip() for line in block]):
            if section == "NAME" and not name:
                name = clean_inline(content)
            builder.add(kind, content)
        block.clear()

    for line in lines:
        if not line.strip():
            flush()
            continue
        indent = _indent(line)
        if indent == _SECTION_INDENT:
            flush()
            section = line.strip()
            builder.add("heading", section, level=2)
        elif indent == _SUBSECTION_INDENT:
            flush()
            builder.add("heading", line.strip(), level=3)
        else:
            block.append(line)
    flush()
    return builder, name


def parse_man(path: Path) -> ParsedDocument:
    """Parse a man page (roff source)."""
    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not a man page")
    text = decode_text(data)
    link = _SO_ONLY.match(text)
    if link:
        raise EmptyDocumentError(f"{path}: no text found (a link to the man page {link[1]})")
    if not _MACROS.search(text):  # ``notes.1``: a man page's suffix on plain text
        builder = ElementBuilder()
        add_text_blocks(builder, text)
        return finish(path, builder, path.stem)
    with parse_errors(path, "man page"):
        builder, name = rendered_to_builder(render(text, path))
    return finish(path, builder, name or path.stem, {"format": "man"})
