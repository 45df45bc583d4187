"""What an agent reads after a search: a document's ``Outline``, a ``Reading`` of part of
it, and the ``GrepResult`` of an exact or regex search over the stored text. Each cites
where its text is (``Location``, chunk index), so one answer leads to the next call."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flexmatch.models.documents import Location

MAX_READ_CHARS = 12_000  # the text one read returns at most
MAX_NEIGHBOURS = 10  # chunks read before or after the one named
MAX_PATTERN_CHARS = 500
MAX_GREP_HITS = 200
GREP_SECONDS = 2.0  # the time a grep may take (a catastrophic regex stops here)
SECTION_SEPARATOR = " › "

ExpandMode = Literal["none", "section", "neighbours"]
"""What a search shows around a result (``query.expand``): nothing more, the rest of its
section, or the chunks either side of it."""
EXPAND_MODES: tuple[ExpandMode, ...] = get_args(ExpandMode)


class OutlineEntry(BaseModel):
    """One heading of a document: where it is and which chunks it covers."""

    heading: str
    level: int = Field(ge=1, description="1 for a top heading.")
    section: str = Field(description="Its heading path, as ``read(section=...)`` takes it.")
    location: Location | None = Field(None, description="Where its text is (pages, lines).")
    chunk_start: int = Field(ge=0, description="The first chunk under it.")
    chunk_end: int = Field(ge=0, description="The last chunk under it (inclusive).")


class Outline(BaseModel):
    """``outline``: the headings of a document in reading order."""

    document_id: str
    title: str
    uri: str
    source: str
    chunks: int = Field(description="How many chunks it has (indexes 0 to chunks - 1).")
    location: Location | None = Field(None, description="Where its text is, in all.")
    headings: list[OutlineEntry]


class ReadChunk(BaseModel):
    """One chunk's text as a read returns it."""

    index: int
    heading_path: list[str]
    location: Location | None = None
    cite: str
    content: str


class ExpandedContext(BaseModel):
    """The text a search with ``expand`` shows in place of a result's bare chunk: its
    section or its neighbouring chunks, which hold the chunk itself (the result's own
    ``content`` and ``cite`` still name the hit). ``shown_in``: the rank of an earlier
    result whose context already holds this result's chunk (no text repeated here)."""

    kind: Literal["section", "neighbours"]
    text: str = Field("", description="The chunks, in order (empty when shown_in).")
    chunk_start: int = Field(ge=0, description="The first chunk it covers.")
    chunk_end: int = Field(ge=0, description="The last chunk it covers (inclusive).")
    section: str | None = Field(None, description="Its heading path, as read(section=) takes it.")
    cite: str = Field("", description="Where the whole expanded text is: 'guide.md › A pp. 2-3'.")
    tokens: int = Field(0, ge=0, description="Its estimated tokens (what the budget counts).")
    shown_in: int | None = Field(None, description="The rank whose context holds this chunk.")


class Reading(BaseModel):
    """``read``: part of a document, in order, at most ``MAX_READ_CHARS`` characters.
    ``truncated``: the part asked for goes on; ``next_chunk`` says where (read on with
    ``chunk=next_chunk, after=...``)."""

    document_id: str
    title: str
    uri: str
    chunks: list[ReadChunk]
    truncated: bool = False
    next_chunk: int | None = Field(
        None, description="Where the part asked for goes on, when truncated."
    )
    remaining: int = Field(0, description="Chunks of the part asked for not returned.")


class GrepHit(BaseModel):
    """One line of the stored text that matches, cited."""

    document_id: str
    chunk_id: str
    chunk_index: int
    uri: str
    title: str
    source: str
    heading_path: list[str]
    location: Location | None = Field(
        None, description="Where the match is: its line when the chunk's lines are known."
    )
    cite: str
    match: str = Field(description="The text the pattern matched.")
    line: str = Field(description="The line it is on (long lines cut around the match).")


class GrepResult(BaseModel):
    """``grep``: the matching lines of the documents the caller may read, in document
    order. ``truncated``: it stopped at ``limit`` hits or its time budget (``stopped``)."""

    pattern: str
    regex: bool
    hits: list[GrepHit]
    documents: int = Field(description="How many documents the hits are in.")
    truncated: bool = False
    stopped: str | None = Field(None, description="'limit' or 'time', when truncated.")


class ReadRequest(BaseModel):
    """What part of a document to read: one of a ``section`` (a heading path, as the
    outline gives it, or one heading), ``pages``, ``lines`` (first and last, inclusive)
    or a ``chunk`` with ``before``/``after`` neighbours; none: from its beginning."""

    model_config = ConfigDict(extra="forbid")

    section: str | None = Field(None, min_length=1, max_length=1_000)
    pages: tuple[int, int] | None = None
    lines: tuple[int, int] | None = None
    chunk: int | None = Field(None, ge=0)
    before: int = Field(0, ge=0, le=MAX_NEIGHBOURS)
    after: int = Field(0, ge=0, le=MAX_NEIGHBOURS)

    @model_validator(mode="after")
    def _one_part(self) -> ReadRequest:
        named = [n for n in ("section", "pages", "lines", "chunk") if getattr(self, n) is not None]
        if len(named) > 1:
            raise ValueError(f"name one part to read, not {' and '.join(named)}")
        if (self.before or self.after) and self.chunk is None:
            raise ValueError("before and after count chunks around a chunk: name the chunk")
        for name in ("pages", "lines"):
            span: tuple[int, int] | None = getattr(self, name)
            if span is not None and not 1 <= span[0] <= span[1]:
                raise ValueError(f"{name} must be a first and a last from 1, first <= last")
        return self


class GrepRequest(BaseModel):
    """An exact (or, with ``regex``, a regular-expression) search of the stored text."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(min_length=1, max_length=MAX_PATTERN_CHARS)
    regex: bool = False
    ignore_case: bool = False
    filters: dict[str, Any] | None = None
    limit: int = Field(20, ge=1, le=MAX_GREP_HITS)
