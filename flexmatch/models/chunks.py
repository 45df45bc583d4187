"""A chunk as it is stored (``Chunk`` with its ``MatchingText``s) and as a query finds it
(``SearchResult`` with its ``Signals`` and citation)."""

from __future__ import annotations

import functools
import re
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, computed_field

from flexmatch.models.documents import Location
from flexmatch.models.reading import ExpandedContext

MatchKind = Literal["question", "sentence", "keyword", "content", "title", "learned"]
"""What a matching text is: a generated question, a sentence or keyword of the chunk, the
chunk's own text (``content``), its document's title, or a query someone marked this
chunk helpful for (``learned``, see ``KnowledgeBase.add_feedback``). The one list of match
kinds."""
MATCH_KINDS: tuple[MatchKind, ...] = get_args(MatchKind)


class Mark(BaseModel):
    """One helpful mark: who gave it (a principal's label) and when (ISO 8601, UTC)."""

    who: str
    at: str


class Learned(BaseModel):
    """What is kept of a learned matching text: its id (what removes it), how many
    helpful marks it merged, and the last of them (who and when)."""

    id: str
    count: int = 1
    marks: list[Mark] = Field(default_factory=list)


class MatchingText(BaseModel):
    """A short text that is embedded and matched against queries for one chunk."""

    text: str
    kind: MatchKind = "question"
    location: Location | None = Field(
        None,
        description="Where the text is in the document, when that is narrower than its "
        "chunk (a sentence of a chunk continued over a page break): what a result that "
        "matched it cites.",
    )
    learned: Learned | None = Field(
        None, description="Of a learned matching text: its id, and who marked it when."
    )


class Chunk(BaseModel):
    """A section after enrichment: what gets stored and returned to the agent."""

    id: str
    document_id: str
    index: int
    text: str
    heading_path: list[str] = Field(default_factory=list)
    qualifying_text: str = ""
    matching_texts: list[MatchingText] = Field(default_factory=list)
    location: Location | None = None


@functools.cache
def _shared_names(source: type[BaseModel], target: type[BaseModel]) -> tuple[str, ...]:
    fields = {**source.model_fields, **source.model_computed_fields}
    return tuple(name for name in target.model_fields if name in fields)


def shared_fields(source: BaseModel, target: type[BaseModel]) -> dict[str, Any]:
    """The values of ``source``'s fields (computed ones too) that ``target`` also has, by
    name: the one conversion between the shapes a chunk takes (``Chunk``, the stored
    ``MatchPayload``, ``SearchResult``, ``ResultItem``, ``ChunkView``), so a field they
    share is copied here and nowhere else."""
    return {name: getattr(source, name) for name in _shared_names(type(source), target)}


class Signals(BaseModel):
    """Why a chunk matched: first-stage scores and ranks, and the rerank score."""

    # cosines as ranking compares them: an LLM question's lowered by 0.15 (a question is
    # close to any other question whatever the topic; ``points.QUERY_LIKE_OFFSET``)
    dense: float | None = None  # best cosine over the chunk's matching texts
    dense_rank: int | None = None
    question: float | None = None  # best cosine over its sentences / questions
    content: float | None = None  # cosine with the chunk text itself
    lexical: float | None = None  # BM25 of the chunk text
    lexical_rank: int | None = None
    first_stage: float | None = None  # the fused first-stage score
    rerank: float | None = None
    demoted: int | None = None  # places moved down: marked unhelpful for a query near this
    hop: int | None = None  # deep search: the hop whose search placed it (1: the question itself)
    found_by: str | None = None  # deep search: that follow-up query (hop > 1)


class SearchResult(BaseModel):
    """One chunk answering a query, with the text that matched it."""

    chunk_id: str
    document_id: str
    uri: str
    source: str
    title: str
    heading_path: list[str]
    content: str
    qualifying_text: str
    matched_text: str
    score: float
    chunk_index: int = 0  # its place in the document: what ``read(chunk=...)`` takes
    metadata: dict[str, Any] = Field(default_factory=dict)
    signals: Signals = Field(default_factory=Signals)
    location: Location | None = None
    matched_location: Location | None = None  # the matched text's, when narrower
    context: ExpandedContext | None = None  # its section or neighbours (``expand``)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cite(self) -> str:
        """A short reference to where the answer is: ``handbook.pdf p. 7``; the page of the
        matched text when it is narrower than the chunk's pages (``matched_location``)."""
        return cite(self.uri, self.title, self.matched_location or self.location)


def cite_name(uri: str, title: str = "") -> str:
    """The name a citation gives a document: its file name (the last part of its path or
    URL, without a query; with its fragment: a record's ``corpus.jsonl#42``), else its
    title, else its whole URI."""
    address, _, fragment = uri.partition("#")
    path = address.removeprefix("upload:").split("?", 1)[0].rstrip("/\\")
    name = path.replace("\\", "/").rsplit("/", 1)[-1] if path else ""
    if not name:
        return title or uri
    return f"{name}#{fragment}" if fragment else name


# a man page's file name: ``fsck.8``, ``printf.3posix.gz``
_MAN_PAGE_FILE = re.compile(r"^(.+)\.([1-9n][a-z0-9]*)(?:\.(?:gz|bz2|xz|lzma|zst|Z))?$")


def cite(uri: str, title: str, location: Location | None) -> str:
    """A short citation: ``handbook.pdf p. 7``, ``shutil.py:512-560``, ``sales.xlsx › Q3
    rows 2-40``, ``deck.pptx slide 3``, ``guide.html#install``, ``guide.html › Install``,
    ``fsck(8) › EXIT CODES``, ``mail.eml › report.pdf p. 2``; just the name when the
    location is not known."""
    text = cite_name(uri, title)
    if location is None:
        return text
    loc = location
    if loc.section and (man := _MAN_PAGE_FILE.match(text)):  # a man page, as ``man`` names it
        text = f"{man[1]}({man[2]})"
    if loc.fragment:  # the part of the page, not the one the address named
        text = text.split("#", 1)[0]
    if loc.attachment:
        text += f" › {loc.attachment}"
    if loc.line_start is not None:
        end = loc.line_end if loc.line_end is not None else loc.line_start
        text += f":{loc.line_start}" if end == loc.line_start else f":{loc.line_start}-{end}"
    if loc.fragment:
        text += f"#{loc.fragment}"
    if loc.section:
        text += f" › {loc.section}"
    if loc.page is not None:
        text += _span("p.", "pp.", loc.page, loc.page_end)
    if loc.slide is not None:
        text += _span("slide", "slides", loc.slide, loc.slide_end)
    if loc.sheet:
        text += f" › {loc.sheet}"
    if loc.row_start is not None:
        text += _span("row", "rows", loc.row_start, loc.row_end)
    return text


def _span(one: str, many: str, start: int, end: int | None) -> str:
    """`` p. 7`` for one page (slide, row), `` pp. 7-9`` for several."""
    last = end or start
    return f" {one} {start}" if last == start else f" {many} {start}-{last}"
