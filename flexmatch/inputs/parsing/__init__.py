"""Turn files (and plain strings) into ``ParsedDocument``s, one parser per format family.

Parsers are named (``pdf``, ``text``, ``man``, …) and registered like source types:
through the ``flexmatch.parsers`` entry-point group, the built-ins included (``BUILTIN``
is the table pyproject.toml declares; a checkout without installed metadata registers
from it). A file's parser is chosen, in order, by the ``ingest.parsers`` setting (file
names or globs → a parser name), by its suffix (``SUFFIXES``: to read a new suffix, add
one line there), and for any other file by its content (``sniff``: text is read as text,
a binary blob is an unsupported type). A ``.gz``/``.bz2``/``.xz`` file is read as the file
it holds (``NEWS.gz`` as text, ``ls.1.gz`` as a man page), its size cap applied to the
decompressed bytes.

Every failure is a ``ParseError`` subclass whose message names the file. Parsers run fully
offline, and their third-party libraries are imported only when a file of that kind is
parsed, so importing this package stays fast.
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from flexmatch import plugins
from flexmatch.errors import (
    EmptyDocumentError,
    FlexMatchError,
    NotProseError,
    ParseError,
    UnsupportedFormatError,
)
from flexmatch.inputs.parsing._common import (
    ElementBuilder,
    finish,
    out_of_memory,
    ran_out_of_memory,
    short_reason,
)
from flexmatch.inputs.parsing.code import LANGUAGES
from flexmatch.inputs.parsing.compressed import (
    COMPRESSED,
    ZIP_PARSERS,
    check_unpacked,
    decompressed,
    inner_name,
)
from flexmatch.inputs.parsing.html import parse_html_bytes
from flexmatch.inputs.parsing.markdown import markdown_to_builder
from flexmatch.inputs.parsing.sniff import (
    NOT_PROSE,
    NOT_PROSE_SAMPLE,
    PROSE_PARSERS,
    TEXT_PARSERS,
    is_binary,
    not_prose,
    sniff,
)
from flexmatch.inputs.parsing.text import add_text_blocks
from flexmatch.models import ParsedDocument

__all__ = [
    "BUILTIN",
    "PARSERS",
    "SUFFIXES",
    "SUPPORTED_SUFFIXES",
    "broken_parser_plugins",
    "check_parsers",
    "parse_file",
    "parse_html_bytes",
    "parse_text",
    "parser_names",
    "readable_suffixes",
    "skip_reason",
]

Parse = Callable[[Path], ParsedDocument]
ENTRY_POINT_GROUP = plugins.PARSERS.group
_PACKAGE = "flexmatch.inputs.parsing"
# the built-in parsers by name, as pyproject.toml declares them (a test keeps the two equal)
BUILTIN: dict[str, str] = {
    "code": f"{_PACKAGE}.code:parse_code",
    "csv": f"{_PACKAGE}.tabular:parse_csv",
    "docx": f"{_PACKAGE}.docx:parse_docx",
    "email": f"{_PACKAGE}.email:parse_email",
    "epub": f"{_PACKAGE}.epub:parse_epub",
    "html": f"{_PACKAGE}.html:parse_html",
    "image": f"{_PACKAGE}.image:parse_image",
    "man": f"{_PACKAGE}.man:parse_man",
    "markdown": f"{_PACKAGE}.markdown:parse_markdown",
    "notebook": f"{_PACKAGE}.notebook:parse_notebook",
    "odt": f"{_PACKAGE}.odt:parse_odt",
    "pdf": f"{_PACKAGE}.pdf:parse_pdf",
    "pptx": f"{_PACKAGE}.pptx:parse_pptx",
    "rst": f"{_PACKAGE}.rst:parse_rst",
    "rtf": f"{_PACKAGE}.rtf:parse_rtf",
    "text": f"{_PACKAGE}.text:parse_text_file",
    "tsv": f"{_PACKAGE}.tabular:parse_tsv",
    "xlsx": f"{_PACKAGE}.xlsx:parse_xlsx",
}
# suffix (lower case, with the dot) → parser name: the one table a new suffix goes in
SUFFIXES: dict[str, str] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".eml": "email",
    ".rtf": "rtf",
    ".odt": "odt",
    ".rst": "rst",
    ".rest": "rst",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".epub": "epub",
    ".ipynb": "notebook",
    **dict.fromkeys((".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"), "image"),  # by OCR
    **{f".{n}": "man" for n in range(1, 10)},  # man page sections 1-9
    **dict.fromkeys(LANGUAGES, "code"),  # source code and config files (the 'code' extra)
}


def _builtin(name: str) -> Parse:
    module, _, attribute = BUILTIN[name].partition(":")
    parser: Parse = getattr(importlib.import_module(module), attribute)
    return parser


PARSERS: dict[str, Parse] = {suffix: _builtin(name) for suffix, name in SUFFIXES.items()}
"""The built-in parser of each suffix."""

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(PARSERS)
"""Suffixes read by their own parser (lower case, with the dot); ``.gz``, ``.bz2`` and
``.xz`` files are read as the file they hold, any other file by its content."""

# -- the registry ----------------------------------------------------------------------


def _accept(name: str, parser: Any, where: str) -> list[tuple[str, Parse]]:
    if not callable(parser):
        raise TypeError(f"{type(parser).__name__} is not callable")
    return [(name, parser)]


PARSER_REGISTRY: plugins.Registry[str, Parse] = plugins.Registry(
    plugins.PARSERS, tuple(BUILTIN.items()), _accept
)


def _claimed() -> dict[str, str]:
    """Suffixes plug-ins claim (a ``suffixes`` attribute on the parser), each by the first
    plug-in in name order; never one a built-in parser reads."""
    claimed: dict[str, str] = {}
    for name in PARSER_REGISTRY.names():
        if name in BUILTIN:
            continue
        for suffix in getattr(PARSER_REGISTRY.items[name], "suffixes", ()) or ():
            suffix = str(suffix).lower()
            if suffix.startswith(".") and suffix not in SUFFIXES:
                claimed.setdefault(suffix, name)
    return claimed


def parser_names() -> list[str]:
    """The names of the available parsers (built-in and plug-ins)."""
    return PARSER_REGISTRY.names()


def broken_parser_plugins() -> dict[str, str]:
    """Parser plug-ins that are not used, and why."""
    return PARSER_REGISTRY.failures()


def _parser(name: str, where: str) -> Parse:
    return PARSER_REGISTRY.get(name, where)


def check_parsers(parsers: Mapping[str, str], where: str = "ingest.parsers") -> None:
    """Refuse a ``parsers`` setting that names a parser nobody registered. Loads the
    plug-ins (here, before parser processes fork, so they inherit them)."""
    PARSER_REGISTRY.load()
    for pattern, name in parsers.items():
        _parser(name, f"{where}: '{pattern}'")


def readable_suffixes() -> list[str]:
    """Every suffix a parser reads (built-in, plug-ins', compressed), sorted; any other
    file is read when its content is text."""
    PARSER_REGISTRY.load()
    return sorted({*SUFFIXES, *_claimed(), *COMPRESSED})


def _suffix_parser(suffix: str) -> str | None:
    PARSER_REGISTRY.load()
    return SUFFIXES.get(suffix) or _claimed().get(suffix)


# -- what one parse may read: its byte cap and the parsers setting ----------------------

HARD_CAP = 15_000_000  # the hard cap of ingest.max_document_bytes


@dataclass(frozen=True)
class Reading:
    """How files are read: the byte cap (of decompressed bytes too) and the ``parsers``
    setting (file name or glob → parser name, first match wins)."""

    max_bytes: int = HARD_CAP
    parsers: Mapping[str, str] = field(default_factory=dict)

    def chosen(self, *names: str) -> str | None:
        """The parser the setting names for a file called one of ``names``."""
        for pattern, parser in self.parsers.items():
            if any(name == pattern or fnmatch(name, pattern) for name in names):
                return parser
        return None


_READING: ContextVar[Reading] = ContextVar("reading", default=Reading())  # noqa: B039


@contextmanager
def _reading(reading: Reading) -> Iterator[None]:
    token = _READING.set(reading)
    try:
        yield
    finally:
        _READING.reset(token)


def _head(path: Path, size: int = 8192) -> bytes:
    with path.open("rb") as handle:
        return handle.read(size)


def _check_prose(path: Path, name: str, label: str) -> tuple[str, Parse]:
    """``name``'s parser, unless it reads text and the file holds none to index
    (``not_prose``): then a ``NotProseError`` naming why."""
    if name in PROSE_PARSERS:
        reason = not_prose(_head(path, NOT_PROSE_SAMPLE))
        if reason is not None:
            raise NotProseError(
                f"{label}: {NOT_PROSE[reason]}; not indexed (to read it anyway, name a "
                "parser for it in ingest.parsers)",
                reason,
            )
    return name, _parser(name, f"{path.name}: ingest.parsers")


def _choose(path: Path, reading: Reading, names: tuple[str, ...], label: str) -> tuple[str, Parse]:
    """The parser for ``path`` (which may be a decompressed copy; ``names`` are the names
    the setting is matched against, ``label`` names the file in errors): the setting,
    the suffix, else the content. Binary data is refused by the parsers of text, and text
    that is no prose by the parsers of prose, unless the setting names the parser."""
    where = f"{path.name}: ingest.parsers"
    chosen = reading.chosen(*names)
    if chosen is not None:
        return chosen, _parser(chosen, where)
    suffix = path.suffix.lower()
    by_suffix = _suffix_parser(suffix)
    if by_suffix is not None:
        if by_suffix in TEXT_PARSERS and is_binary(_head(path)):
            raise UnsupportedFormatError(
                f"{label}: looks like a binary file, not the text a '{suffix}' file holds"
            )
        return _check_prose(path, by_suffix, label)
    sniffed = sniff(_head(path))
    if sniffed is None:
        shown = suffix or "(none)"
        supported = ", ".join(readable_suffixes())
        raise UnsupportedFormatError(
            f"{label}: unsupported file type '{shown}' (binary content; supported: "
            f"{supported}, and text of any name)"
        )
    return _check_prose(path, sniffed, label)


def parse_file(
    path: Path | str, max_bytes: int | None = None, parsers: Mapping[str, str] | None = None
) -> ParsedDocument:
    """Parse one file with the parser its name, the ``parsers`` setting or its content
    chooses (``max_bytes``: the cap on what a compressed file holds).

    Raises ``UnsupportedFormatError`` for binary content no parser reads (its
    ``NotProseError`` for text that is no prose: PostScript, a symbol table, …),
    ``EmptyDocumentError`` for a file without text (including zero-byte files),
    ``EncryptedDocumentError`` for a password-protected file, ``DocumentTooLargeError``
    for a compressed file holding more than the cap and ``ParseError`` for anything else.
    """
    path = Path(path)
    reading = Reading(max_bytes or HARD_CAP, dict(parsers or {}))
    suffix = path.suffix.lower()
    try:
        if not path.is_file():
            raise ParseError(f"{path}: not found or not a regular file")
        if path.stat().st_size == 0:
            raise EmptyDocumentError(f"{path}: no text found (the file is empty)")
        with _reading(reading):
            if suffix in COMPRESSED:  # a setting for its name chooses how to read what it holds
                return _parse_compressed(path, reading)
            name, parser = _choose(path, reading, (path.name,), str(path))
            if name in ZIP_PARSERS:
                check_unpacked(path, str(path))
            return parser(path)
    except FlexMatchError:
        raise
    except ImportError as exc:
        raise ParseError(
            f"{path}: reading {suffix or 'these'} files needs the 'parsers' extra "
            f"(missing module '{exc.name}'): pip install 'flexmatch[parsers]'"
        ) from exc
    except OSError as exc:
        raise ParseError(f"{path}: could not read file: {exc.strerror or exc}") from exc
    except Exception as exc:  # a parser bug must still name the file
        if ran_out_of_memory(exc):
            raise out_of_memory(path) from None
        raise ParseError(f"{path}: could not parse file: {short_reason(exc)}") from exc


def _parse_compressed(path: Path, reading: Reading) -> ParsedDocument:
    """The file a ``.gz``/``.bz2``/``.xz`` file holds, read by its own parser: written
    (at most the cap) to a private folder under its inner name, then parsed there; errors
    name the compressed file."""
    inner = inner_name(path)
    data = decompressed(path, reading.max_bytes)
    with tempfile.TemporaryDirectory(prefix="flexmatch-") as folder:
        copy = Path(folder) / inner
        copy.write_bytes(data)
        if not data.strip():
            raise EmptyDocumentError(f"{path}: no text found (it holds an empty file)")
        try:
            label = f"{path} ({inner})"
            name, parser = _choose(copy, reading, (inner, path.name), label)
            if name in ZIP_PARSERS:
                check_unpacked(copy, label)
            parsed = parser(copy)
        except FlexMatchError as exc:
            message = str(exc).replace(str(copy), f"{path} ({inner})")
            if isinstance(exc, NotProseError):
                raise NotProseError(message, exc.reason) from None
            raise type(exc)(message) from None
    return parsed.model_copy(update={"metadata": {**parsed.metadata, "compressed": path.suffix}})


def skip_reason(path: Path, parsers: Mapping[str, str] | None = None) -> str | None:
    """Why a folder walk should skip ``path`` without parsing it, read from its name and
    first bytes: ``empty`` (no bytes, or only white space), ``binary file`` (a text
    format holding binary data) or ``unsupported type`` (binary content no parser
    reads); None: parse it."""
    head = _head(path)
    if not head.strip() and path.stat().st_size <= len(head):
        return "empty"
    suffix = path.suffix.lower()
    reading = Reading(parsers=dict(parsers or {}))
    if suffix in COMPRESSED or reading.chosen(path.name) is not None:
        return None  # known only once decompressed, or the user's choice
    name = _suffix_parser(suffix)
    if name is None:
        return "unsupported type" if is_binary(head) else None
    if name in TEXT_PARSERS and is_binary(head):
        return "binary file"
    return None


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


def _looks_like_markdown(text: str) -> bool:
    lines = text.lstrip().splitlines()
    return any(
        line.startswith(("# ", "## ", "### ", "#### ", "```", "~~~")) for line in lines[:200]
    )


def current_reading() -> Reading:
    """The reading options of the parse under way (a nested parser, e.g. an archive's)."""
    return _READING.get()
