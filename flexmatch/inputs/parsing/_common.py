"""Helpers every parser shares: whitespace clean-up, error wrapping and the final checks.

Kept free of third-party imports so that ``import flexmatch.inputs.parsing`` stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flexmatch.errors import (
    DocumentTooLargeError,
    EmptyDocumentError,
    FlexMatchError,
    ParseError,
)
from flexmatch.inputs.isolation import memory_cap_mb
from flexmatch.models import Element, ElementKind, Location, ParsedDocument

# Bumped when what the built-in parsers make of a file changes (1: a man page's and an
# HTML page's elements name the section they are in, underlined plain-text lines are
# headings): a stored copy of an unchanged file read before is read again, not reused.
PARSER_REVISION = 1

_INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")
_SPACES = re.compile(r"\s+")
_INLINE_SPACES = re.compile(r"[^\S\n]+")
_MANY_BLANK_LINES = re.compile(r"\n\s*\n(\s*\n)+")

# A bullet glyph (stripped) or a short number/letter label (kept), then a space.
_BULLET = re.compile(r"^\s*[•●▪◦‣∙·■□➢►❖✓\-–*]\s+")
_NUMBERED = re.compile(r"^\s*\(?(?:\d{1,2}|[a-zA-Z])[.)]\s+")

_MEANINGLESS_TITLES = {
    "document",
    "title",
    "slide 1",
    "powerpoint presentation",
    "presentation",
    "sheet1",
    "book1",
}
_FILE_SUFFIX = re.compile(r"\.(pdf|docx?|pptx?|xlsx?|odt|rtf|txt|html?|md)$", re.IGNORECASE)


def clean_inline(text: str) -> str:
    """Collapse every run of whitespace (newlines included) to one space."""
    return _SPACES.sub(" ", _INVISIBLE.sub("", text)).strip()


def clean_lines(text: str) -> str:
    """Clean a table: collapse spaces inside each line and drop empty lines."""
    lines = (_INLINE_SPACES.sub(" ", _INVISIBLE.sub("", line)).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def clean_code(text: str) -> str:
    """Clean code: keep indentation, trim trailing spaces, allow at most one blank line."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").expandtabs(4)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _MANY_BLANK_LINES.sub("\n\n", text).strip("\n")


def _code_lines(text: str, location: Location) -> tuple[str, Location]:
    """Code cleaned like ``clean_code`` but line for line, with the lines it spans in the
    file (``location.line_start`` is the file line of ``text``'s first line)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").expandtabs(4)
    lines = [line.rstrip() for line in text.split("\n")]
    first = next((i for i, line in enumerate(lines) if line), len(lines))
    last = max((i for i, line in enumerate(lines) if line), default=first)
    start = (location.line_start or 1) + first
    kept = "\n".join(lines[first : last + 1])
    end = start + max(0, last - first)
    return kept, location.model_copy(update={"line_start": start, "line_end": end})


def table_text(rows: Iterable[Iterable[str]]) -> str:
    """Render rows of cells as lines with cells joined by `` | `` (empty cells dropped)."""
    lines = []
    for row in rows:
        cells = [clean_inline(c) for c in row]
        cells = [c for c in cells if c]
        if cells:
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def split_list_lines(lines: Iterable[str]) -> list[tuple[ElementKind, str]]:
    """Split text lines into paragraphs and list items at lines that start with a bullet.

    Lines that follow a bullet and start with a lowercase letter or an indent continue
    that item; any other line starts (or continues) a plain paragraph.
    """
    return [(kind, text) for kind, text, _, _ in split_list_line_spans(lines)]


def split_list_line_spans(lines: Iterable[str]) -> list[tuple[ElementKind, str, int, int]]:
    """``split_list_lines``, each piece with the indexes of its first and last line."""
    out: list[tuple[ElementKind, list[str], int, int]] = []
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        bullet = _BULLET.match(raw)
        if bullet or _NUMBERED.match(raw):
            text = raw[bullet.end() :] if bullet else raw
            out.append(("list_item", [text], index, index))
        elif out and (out[-1][0] == "paragraph" or raw[:1].isspace() or raw.lstrip()[:1].islower()):
            kind, parts, first, _ = out[-1]
            parts.append(raw)  # in place: a long paragraph stays linear
            out[-1] = (kind, parts, first, index)
        else:
            out.append(("paragraph", [raw], index, index))
    return [(kind, join_wrapped(parts), first, last) for kind, parts, first, last in out]


def join_wrapped(lines: Iterable[str]) -> str:
    """Join hard-wrapped lines into one string, undoing ``word-\\nwrap`` hyphenation."""
    parts: list[str] = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        last = parts[-1] if parts else ""
        if last[-1:] == "-" and last[-2:-1].islower() and line[:1].islower():
            parts[-1] = last[:-1] + line  # only the line's end is looked at: linear
        else:
            parts.append(line)
    return clean_inline(" ".join(parts))


def strip_bullet(text: str) -> str | None:
    """The text without its leading bullet glyph, or None when it has no bullet."""
    match = _BULLET.match(text)
    return text[match.end() :] if match else None


class ListMarkers:
    """Markdown list markers for items given their nesting level in the source, so a chunk
    reads as a Markdown list: ``- `` for bullets, ``1. `` counted per list, a nested item
    indented under its parent's text. Levels are relative: a list whose first item sits at
    Word's third level is still a top-level list here."""

    def __init__(self) -> None:
        self._open: list[list[Any]] = []  # [source level, ordered, number, marker width]

    def reset(self) -> None:
        """A block that is not a list item came between: the next item starts a list."""
        self._open.clear()

    def prefix(self, level: int = 0, ordered: bool = False, number: int | None = None) -> str:
        """The indent and marker of the next item at source nesting ``level``; ``number``
        sets an ordered item's number (else it counts on from the previous one)."""
        while self._open and self._open[-1][0] > level:
            self._open.pop()
        top = self._open[-1] if self._open else None
        if top is not None and top[0] == level:
            if top[1] != ordered:
                top[1], top[2] = ordered, 0
            top[2] = number if number is not None else top[2] + 1
        else:
            top = [level, ordered, number if number is not None else 1, 0]
            self._open.append(top)
        marker = f"{top[2]}." if ordered else "-"
        top[3] = len(marker) + 1
        indent = sum(entry[3] for entry in self._open[:-1])
        return " " * indent + marker + " "


class ElementBuilder:
    """Collects elements in reading order, normalising whitespace and dropping empty ones."""

    def __init__(self) -> None:
        self.elements: list[Element] = []
        self.lists = ListMarkers()

    def add_list_item(
        self,
        text: str,
        level: int = 0,
        ordered: bool = False,
        number: int | None = None,
        location: Location | None = None,
    ) -> None:
        """Add a list item with its Markdown marker and indent (``ListMarkers``); the
        whitespace of the text is normalised, the indent in front of the marker kept."""
        text = clean_inline(text)
        if not text:
            return
        prefix = self.lists.prefix(level, ordered, number)
        self.elements.append(Element(kind="list_item", text=prefix + text, location=location))

    def add(
        self,
        kind: ElementKind,
        text: str,
        level: int = 0,
        page: int | None = None,
        location: Location | None = None,
        cleaned: bool = False,
    ) -> None:
        """Add one element. Code whose ``location`` has a first line keeps every line (no
        blank lines collapsed) and gets its exact lines, so a piece of it can be cited.
        ``cleaned``: the text is clean already (a table whose cells were cleaned one by
        one, and that has millions of them)."""
        if cleaned:
            pass
        elif kind == "table":
            text = clean_lines(text)
        elif kind == "code" and location is not None and location.line_start is not None:
            text, location = _code_lines(text, location)
        elif kind == "code":
            text = clean_code(text)
        else:
            text = clean_inline(text)
        if not text.strip():
            return
        self.lists.reset()
        self.elements.append(
            Element(
                kind=kind,
                text=text,
                level=level if kind == "heading" else 0,
                page=page,
                location=location,
            )
        )

    def first_text(self, *kinds: ElementKind) -> str:
        """The text of the first element of one of ``kinds`` ("" if none)."""
        return next((e.text for e in self.elements if e.kind in kinds), "")


def meaningful_title(value: Any) -> str:
    """Return ``value`` cleaned if it can serve as a title, else ""."""
    if not isinstance(value, str):
        return ""
    title = clean_inline(value)
    if title.lower().startswith("microsoft word - "):
        title = title[len("microsoft word - ") :]
    low = title.lower()
    if not title or low in _MEANINGLESS_TITLES or low.startswith("untitled"):
        return ""
    if _FILE_SUFFIX.search(title) or not any(ch.isalnum() for ch in title):
        return ""
    return title[:300]


def short_reason(exc: BaseException) -> str:
    """A one-line description of an exception for a user-facing message."""
    message = clean_inline(str(exc))
    name = type(exc).__name__
    if not message:
        return name
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{name}: {message}"


def memory_cap() -> str:
    """How a parse's memory cap is named in an error."""
    megabytes = memory_cap_mb()
    if megabytes is None:
        return "more memory than this process has (ingest.parse_memory_mb caps a parse)"
    return f"more than the {megabytes:,} MB a parse may use (ingest.parse_memory_mb)"


def out_of_memory(path: Path | str, fmt: str = "") -> DocumentTooLargeError:
    """A parse that ran out of memory (a decompression bomb, say): named with its cap."""
    what = f"the {fmt} file" if fmt else "it"
    return DocumentTooLargeError(f"{path}: parsing {what} needs {memory_cap()}; not read")


def ran_out_of_memory(exc: BaseException) -> bool:
    """A ``MemoryError``, or libxml2's way to say the same (lxml raises an
    ``XMLSyntaxError``, "unknown error", whose log says ``ERR_NO_MEMORY``)."""
    if isinstance(exc, MemoryError):
        return True
    log = getattr(exc, "error_log", None) or ()
    return any(getattr(entry, "type_name", "") == "ERR_NO_MEMORY" for entry in log)


@contextmanager
def parse_errors(path: Path | str, fmt: str) -> Iterator[None]:
    """Turn any library exception into a ``ParseError`` naming the file (FlexMatch errors
    pass; running out of memory names the memory cap)."""
    try:
        yield
    except FlexMatchError:
        raise
    except Exception as exc:
        if ran_out_of_memory(exc):
            raise out_of_memory(path, fmt) from None
        raise ParseError(f"{path}: could not parse {fmt} file: {short_reason(exc)}") from exc


def finish(
    label: Path | str,
    builder: ElementBuilder,
    title: str,
    metadata: dict[str, Any] | None = None,
    empty_hint: str = "",
) -> ParsedDocument:
    """Build the ``ParsedDocument``, refusing documents without any text."""
    if not any(e.text.strip() for e in builder.elements):
        hint = f" ({empty_hint})" if empty_hint else ""
        raise EmptyDocumentError(f"{label}: no text found{hint}")
    return ParsedDocument(title=title, elements=builder.elements, metadata=metadata or {})
