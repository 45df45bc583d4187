"""Rich Text Format (.rtf) via striprtf: control words removed, paragraphs kept.

striprtf writes table rows as "cell|cell|" lines; runs of such lines become one table
element. The code page comes from ``\\ansicpgNNNN`` (cp1252 when absent).
"""

from __future__ import annotations

import re
from pathlib import Path

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, finish, meaningful_title, parse_errors
from flexmatch.models import ParsedDocument

_CODEPAGE = re.compile(rb"\\ansicpg(\d+)")
_INFO_TITLE = re.compile(r"{\\title\s+([^{}]*)}")


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
        text = rtf_to_text(raw, encoding=_encoding(data), errors="replace")
        table: list[str] = []
        for line in text.replace("\r", "\n").split("\n"):
            if line.rstrip().endswith("|"):
                cells = [c.strip() for c in line.rstrip().rstrip("|").split("|")]
                table.append(" | ".join(c for c in cells if c))
                continue
            if table:
                builder.add("table", "\n".join(table))
                table = []
            builder.add("paragraph", line)
        if table:
            builder.add("table", "\n".join(table))
        info_title = _INFO_TITLE.search(raw)
    title = meaningful_title(info_title.group(1)) if info_title else ""
    return finish(path, builder, title or path.stem)
