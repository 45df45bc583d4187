"""Turn files (and plain strings) into ``ParsedDocument``s, one parser per format family.

``parse_file`` picks the parser from the file suffix through ``PARSERS``; every failure is
a ``ParseError`` subclass whose message names the file. Parsers run fully offline, and
their third-party libraries are imported only when a file of that kind is parsed, so
importing this package stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flexmatch.errors import EmptyDocumentError, FlexMatchError, ParseError, UnsupportedFormatError
from flexmatch.inputs.parsing._common import ElementBuilder, finish, short_reason
from flexmatch.inputs.parsing.code import LANGUAGES, parse_code
from flexmatch.inputs.parsing.docx import parse_docx
from flexmatch.inputs.parsing.email import parse_email
from flexmatch.inputs.parsing.html import parse_html, parse_html_bytes
from flexmatch.inputs.parsing.markdown import markdown_to_builder, parse_markdown
from flexmatch.inputs.parsing.odt import parse_odt
from flexmatch.inputs.parsing.pdf import parse_pdf
from flexmatch.inputs.parsing.pptx import parse_pptx
from flexmatch.inputs.parsing.rtf import parse_rtf
from flexmatch.inputs.parsing.text import add_text_blocks, parse_text_file
from flexmatch.inputs.parsing.xlsx import parse_xlsx
from flexmatch.models import ParsedDocument

__all__ = [
    "PARSERS",
    "SUPPORTED_SUFFIXES",
    "parse_file",
    "parse_html_bytes",
    "parse_text",
]

PARSERS: dict[str, Callable[[Path], ParsedDocument]] = {
    ".pdf": parse_pdf,
    ".docx": parse_docx,
    ".html": parse_html,
    ".htm": parse_html,
    ".xhtml": parse_html,
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".txt": parse_text_file,
    ".text": parse_text_file,
    ".log": parse_text_file,
    ".pptx": parse_pptx,
    ".xlsx": parse_xlsx,
    ".xlsm": parse_xlsx,
    ".eml": parse_email,
    ".rtf": parse_rtf,
    ".odt": parse_odt,
    **dict.fromkeys(LANGUAGES, parse_code),  # source code and config files (the 'code' extra)
}

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(PARSERS)
"""Suffixes handled at import time (lower case, with the dot)."""


def parse_file(path: Path | str) -> ParsedDocument:
    """Parse one file, choosing the parser by its suffix (case-insensitive).

    Raises ``UnsupportedFormatError`` for an unknown suffix, ``EmptyDocumentError`` for a
    file without text (including zero-byte files), ``EncryptedDocumentError`` for a
    password-protected file and ``ParseError`` for anything else that goes wrong.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    parser = PARSERS.get(suffix)
    if parser is None:
        supported = ", ".join(sorted(PARSERS))
        shown = suffix or "(none)"
        raise UnsupportedFormatError(
            f"{path}: unsupported file type '{shown}' (supported: {supported})"
        )
    try:
        if not path.is_file():
            raise ParseError(f"{path}: not found or not a regular file")
        if path.stat().st_size == 0:
            raise EmptyDocumentError(f"{path}: no text found (the file is empty)")
        return parser(path)
    except FlexMatchError:
        raise
    except ImportError as exc:
        raise ParseError(
            f"{path}: reading {suffix} files needs the 'parsers' extra "
            f"(missing module '{exc.name}'): pip install 'flexmatch[parsers]'"
        ) from exc
    except OSError as exc:
        raise ParseError(f"{path}: could not read file: {exc.strerror or exc}") from exc
    except Exception as exc:  # a parser bug must still name the file
        raise ParseError(f"{path}: could not parse file: {short_reason(exc)}") from exc


def _looks_like_markdown(text: str) -> bool:
    lines = text.lstrip().splitlines()
    return any(
        line.startswith(("# ", "## ", "### ", "#### ", "```", "~~~")) for line in lines[:200]
    )


def parse_text(text: str, title: str = "") -> ParsedDocument:
    """Parse a plain string: paragraphs split on blank lines, markdown headings honoured.

    The title is ``title`` if given, else the first level-1 heading, else "". Its elements
    have no lines: a string is not a file a citation could point into.
    """
    label = title or "text"
    if _looks_like_markdown(text):
        builder, front_title = markdown_to_builder(text, lines=False)
        h1 = next((e.text for e in builder.elements if e.kind == "heading" and e.level == 1), "")
        return finish(label, builder, title or front_title or h1)
    builder = ElementBuilder()
    add_text_blocks(builder, text, first_line=None)
    return finish(label, builder, title)
