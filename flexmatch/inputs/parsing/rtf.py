"""Rich Text Format (.rtf) via striprtf: control words removed, paragraphs kept.

striprtf writes table rows as "cell|cell|" lines; runs of such lines become one table
element. The code page comes from ``\\ansicpgNNNN`` (cp1252 when absent).

striprtf drops every control word, among them ``\\outlinelevelN``, the paragraph property
Word and Pandoc write for a heading (level N+1; 9 is body text). So before it runs, each
such control word is replaced in the raw RTF by a text marker that survives as the start
of its paragraph's line; a line holding one becomes a heading of that level.
"""

from __future__ import annotations

import re
from pathlib import Path

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, finish, meaningful_title, parse_errors
from flexmatch.models import ParsedDocument

_CODEPAGE = re.compile(rb"\\ansicpg(\d+)")
_INFO_TITLE = re.compile(r"{\\title\s+([^{}]*)}")
# \outlinelevelN ends at a non-letter-or-digit; one space after it is its delimiter
_OUTLINE = re.compile(r"\\outlinelevel([0-8])(?![0-9A-Za-z]) ?")
_MARK = "qqflexmatchoutline"  # plain letters: striprtf keeps them as text
_MARKED = re.compile(_MARK + r"([0-8])qq\s*")


def _encoding(data: bytes) -> str:
    match = _CODEPAGE.search(data[:4096])
    if match:
        name = f"cp{match.group(1).decode()}"
        try:
            "".encode(name)
            return name
        except LookupError:
            pass
    return "cp1252"


def parse_rtf(path: Path) -> ParsedDocument:
    """Parse an .rtf file."""
    from striprtf.striprtf import rtf_to_text

    data = path.read_bytes()
    if not data.lstrip().startswith(b"{\\rtf"):
        raise ParseError(f"{path}: could not parse RTF file: missing the {{\\rtf header")
    builder = ElementBuilder()
    with parse_errors(path, "RTF"):
        raw = data.decode("latin-1")
        marked = _OUTLINE.sub(lambda m: f" {_MARK}{m.group(1)}qq ", raw)
        text = rtf_to_text(marked, encoding=_encoding(data), errors="replace")
        table: list[str] = []
        for line in text.replace("\r", "\n").split("\n"):
            if line.rstrip().endswith("|"):
                cells = [c.strip() for c in line.rstrip().rstrip("|").split("|")]
                table.append(" | ".join(c for c in cells if c))
                continue
            if table:
                builder.add("table", "\n".join(table))
                table = []
            outline = _MARKED.search(line)
            if outline:  # a paragraph with an outline level: a heading
                text_only = _MARKED.sub(" ", line)
                builder.add("heading", text_only, level=int(outline.group(1)) + 1)
            else:
                builder.add("paragraph", line)
        if table:
            builder.add("table", "\n".join(table))
        info_title = _INFO_TITLE.search(raw)
    title = meaningful_title(info_title.group(1)) if info_title else ""
    return finish(path, builder, title or builder.first_text("heading") or path.stem)
