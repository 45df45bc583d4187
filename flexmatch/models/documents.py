"""A document as a parser reads it: its ``Element``s in reading order, where each sits
(``Location``), and the ``Section``s a chunker cuts from them."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ElementKind = Literal["title", "heading", "paragraph", "list_item", "table", "code"]


class Location(BaseModel):
    """Where a piece of a document sits in its file, as precisely as the format allows, so
    an answer can be cited (``handbook.pdf p. 7``, ``shutil.py:512-560``) and opened there.

    Every field is optional: a parser fills what its format knows. Numbers are 1-based and
    ranges inclusive; an ``_end`` left empty means the range is one page, slide or line.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    page: int | None = Field(None, ge=1, description="PDF page (the first, for a range).")
    page_end: int | None = Field(None, ge=1, description="Last PDF page of a range.")
    slide: int | None = Field(None, ge=1, description="Presentation slide.")
    slide_end: int | None = Field(None, ge=1, description="Last slide of a range.")
    sheet: str | None = Field(None, description="Spreadsheet sheet name.")
    row_start: int | None = Field(None, ge=1, description="First row (sheet or CSV).")
    row_end: int | None = Field(None, ge=1, description="Last row.")
    line_start: int | None = Field(None, ge=1, description="First line of a text file.")
    line_end: int | None = Field(None, ge=1, description="Last line.")
    fragment: str | None = Field(None, description="HTML fragment id (``page.html#id``).")
    attachment: str | None = Field(None, description="E-mail attachment file name.")
    section: str | None = Field(
        None,
        description="The headings of the part of the document, where the format has no "
        "finer place to point to: a man page's section (``EXIT CODES``), an HTML page's "
        "heading without an id (``Install › Linux``).",
    )

    def is_empty(self) -> bool:
        return all(value is None for _, value in self)

    def label(self) -> str:
        """The location on its own, for a page that already names the document:
        ``report.pdf · p. 2``, ``lines 12-40``, ``Q3 · rows 2-40``, ``#install``,
        ``EXIT CODES``."""
        parts = [self.attachment or ""]
        for start, end, one, many in (
            (self.line_start, self.line_end, "line", "lines"),
            (self.page, self.page_end, "p.", "pp."),
            (self.slide, self.slide_end, "slide", "slides"),
        ):
            if start is not None:
                last = end if end is not None else start
                parts.append(f"{one} {start}" if last == start else f"{many} {start}-{last}")
        parts.append(f"#{self.fragment}" if self.fragment else "")
        parts.append(self.section or "")
        parts.append(self.sheet or "")
        if self.row_start is not None:
            last = self.row_end or self.row_start
            rows = (
                f"row {self.row_start}"
                if last == self.row_start
                else f"rows {self.row_start}-{last}"
            )
            parts.append(rows)
        return " · ".join(part for part in parts if part)

    @classmethod
    def spanning(cls, locations: Iterable[Location | None]) -> Location | None:
        """One location covering ``locations`` (a chunk made of several elements): page,
        slide, row and line ranges from the smallest start to the largest end; sheet and
        attachment when they all share one; the first fragment and section (where the
        chunk starts). None when none is known."""
        known = [loc for loc in locations if loc is not None and not loc.is_empty()]
        if not known:
            return None
        values: dict[str, Any] = {}
        for start, end in _RANGES:
            starts = [v for loc in known if (v := getattr(loc, start)) is not None]
            ends = [
                v for loc in known if (v := getattr(loc, end) or getattr(loc, start)) is not None
            ]
            if starts:
                first, last = min(starts), max(ends)
                values[start] = first
                values[end] = last if last != first or start == "line_start" else None
        for name in ("sheet", "attachment"):
            names = {getattr(loc, name) for loc in known}
            if len(names) == 1:
                values[name] = names.pop()
        values["fragment"] = next((loc.fragment for loc in known if loc.fragment), None)
        values["section"] = next((loc.section for loc in known if loc.section), None)
        return cls.model_validate(values)


_RANGES = (
    ("page", "page_end"),
    ("slide", "slide_end"),
    ("row_start", "row_end"),
    ("line_start", "line_end"),
)


class Element(BaseModel):
    """One structural piece of a parsed document, in reading order.

    ``page`` is kept for the parsers that set it alone; it and ``location.page`` are one
    value (either fills the other).
    """

    model_config = ConfigDict(frozen=True)

    kind: ElementKind
    text: str
    level: int = 0  # heading level (1 = top); 0 for non-headings
    page: int | None = None
    location: Location | None = None

    @model_validator(mode="after")
    def _one_page(self) -> Element:
        location = self.location
        if self.page is not None and (location is None or location.page is None):
            extra = location.model_dump(exclude_none=True) if location else {}
            object.__setattr__(self, "location", Location(**{**extra, "page": self.page}))
        elif self.page is None and location is not None and location.page is not None:
            object.__setattr__(self, "page", location.page)
        return self


ELEMENTS_A_JOIN = 2_000  # elements joined in one call (see joined_text)


def joined_text(elements: list[Element]) -> str:
    """The elements' text, joined a slice at a time: one join over the 100,000 elements
    of a big minified script holds the GIL (and a server's event loop) for a quarter of a
    second."""
    step = ELEMENTS_A_JOIN
    if len(elements) <= step:
        return "\n\n".join(e.text for e in elements)
    return "\n\n".join(
        "\n\n".join(e.text for e in elements[start : start + step])
        for start in range(0, len(elements), step)
    )


class ParsedDocument(BaseModel):
    """What a parser returns: the document's own structure, before any chunking."""

    title: str = ""
    elements: list[Element]
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        return joined_text(self.elements)


class Document(ParsedDocument):
    """A parsed document with its identity: where it came from (what it holds is its
    ``ParsedDocument`` part)."""

    id: str
    uri: str
    source: str
    title: str  # required here: a loader always names the document
    # an uploaded file as it was sent, kept beside the document (never in its JSON)
    original: bytes | None = Field(None, exclude=True, repr=False)
    original_name: str | None = Field(None, exclude=True)

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


class SectionPart(BaseModel):
    """Where one stretch of a section's text is: characters ``start`` to ``end`` (as a
    slice) sit at ``location``."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    location: Location


class Section(BaseModel):
    """A chunker's output: a piece of a document with the headings above it.

    ``parts`` say where each stretch of the text is when it is not all in one place (a
    paragraph continued over a page break, a window over two slides), so a sentence of
    it can be cited by its own page (``locate``); empty when ``location`` says it all."""

    text: str
    heading_path: list[str] = Field(default_factory=list)
    location: Location | None = None
    parts: list[SectionPart] = Field(default_factory=list)

    def locate(self, text: str) -> Location | None:
        """Where ``text`` (a sentence or keyword of this section, perhaps after a label
        such as ``Title › Heading: ``) is, when that is narrower than the section: the
        parts every occurrence of it falls in. None when the section is in one place or
        ``text`` is not found in it."""
        if not self.parts:
            return None
        for candidate in _label_stripped(text):
            if not candidate.split():
                continue
            spans = [m.span() for m in _loose_pattern(candidate).finditer(self.text)]
            if not spans:
                continue
            where = Location.spanning(
                part.location
                for part in self.parts
                if any(start < part.end and part.start < end for start, end in spans)
            )
            return where if where != self.location else None
        return None


def _label_stripped(text: str) -> list[str]:
    """``text``, then what follows each label separator in it (``: `` or a line break),
    longest first: a matching text is often its section's label and then its own words."""
    found = [text]
    for match in re.finditer(r": |\n", text):
        rest = text[match.end() :].strip()
        if rest:
            found.append(rest)
    return found


def _loose_pattern(text: str) -> re.Pattern[str]:
    """``text``'s words with any white space between them (a sentence is matched however
    the chunk's text broke its lines)."""
    return re.compile(r"\s+".join(re.escape(word) for word in text.split()))
