"""The data that flows through FlexMatch, one model per stage.

load → ``Document`` (made of ``Element``s) → chunk → ``Section`` → enrich → ``Chunk``
(with its ``MatchingText``s and qualifying text) → embed + store; a query comes back as
``SearchResult``s.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

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

    def is_empty(self) -> bool:
        return all(value is None for _, value in self)

    def label(self) -> str:
        """The location on its own, for a page that already names the document:
        ``report.pdf · p. 2``, ``lines 12-40``, ``Q3 · rows 2-40``, ``#install``."""
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
        attachment when they all share one; the first fragment. None when none is known."""
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


class Section(BaseModel):
    """A chunker's output: a piece of a document with the headings above it."""

    text: str
    heading_path: list[str] = Field(default_factory=list)
    location: Location | None = None


MatchKind = Literal["question", "sentence", "keyword", "content", "title"]
"""What a matching text is: a generated question, a sentence or keyword of the chunk, the
chunk's own text (``content``) or its document's title. The one list of match kinds."""
MATCH_KINDS: tuple[MatchKind, ...] = get_args(MatchKind)


class MatchingText(BaseModel):
    """A short text that is embedded and matched against queries for one chunk."""

    text: str
    kind: MatchKind = "question"


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

    dense: float | None = None  # best cosine over the chunk's matching texts
    dense_rank: int | None = None
    question: float | None = None  # best cosine over its questions / sentences
    content: float | None = None  # cosine with the chunk text itself
    lexical: float | None = None  # BM25 of the chunk text
    lexical_rank: int | None = None
    first_stage: float | None = None  # the fused first-stage score
    rerank: float | None = None


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
    metadata: dict[str, Any] = Field(default_factory=dict)
    signals: Signals = Field(default_factory=Signals)
    location: Location | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cite(self) -> str:
        """A short reference to where the chunk is: ``handbook.pdf p. 7``."""
        return cite(self.uri, self.title, self.location)


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


def cite(uri: str, title: str, location: Location | None) -> str:
    """A short citation: ``handbook.pdf p. 7``, ``shutil.py:512-560``, ``sales.xlsx › Q3
    rows 2-40``, ``deck.pptx slide 3``, ``guide.html#install``, ``mail.eml › report.pdf
    p. 2``; just the name when the location is not known."""
    text = cite_name(uri, title)
    if location is None:
        return text
    loc = location
    if loc.fragment:  # the part of the page, not the one the address named
        text = text.split("#", 1)[0]
    if loc.attachment:
        text += f" › {loc.attachment}"
    if loc.line_start is not None:
        end = loc.line_end if loc.line_end is not None else loc.line_start
        text += f":{loc.line_start}" if end == loc.line_start else f":{loc.line_start}-{end}"
    if loc.fragment:
        text += f"#{loc.fragment}"
    if loc.page is not None:
        end = loc.page_end or loc.page
        text += f" p. {loc.page}" if end == loc.page else f" pp. {loc.page}-{end}"
    if loc.slide is not None:
        end = loc.slide_end or loc.slide
        text += f" slide {loc.slide}" if end == loc.slide else f" slides {loc.slide}-{end}"
    if loc.sheet:
        text += f" › {loc.sheet}"
    if loc.row_start is not None:
        end = loc.row_end or loc.row_start
        text += f" row {loc.row_start}" if end == loc.row_start else f" rows {loc.row_start}-{end}"
    return text


class FailedDocument(BaseModel):
    """A document that could not be ingested, and why. ``skipped`` names why a file a
    folder walk found was passed over rather than failed (``unsupported type``,
    ``binary file``, ``empty``): counted and listed by reason, never an error."""

    uri: str
    error: str
    skipped: str | None = None


class SkippedDocument(BaseModel):
    """A document that was not stored because an identical one already is."""

    uri: str
    document_id: str
    reason: str


class Usage(BaseModel):
    """LLM usage summed over a run."""

    calls: int = 0  # calls made (and paid for)
    cached_calls: int = 0  # answers the LLM cache gave instead
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens the provider served from its cache
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage) -> None:
        """Count ``other`` in (a worker's share, a job's next report), in place: callers
        hold on to this object."""
        for name, value in other:
            setattr(self, name, getattr(self, name) + value)
        self.cost_usd = round(self.cost_usd, 6)

    def __sub__(self, other: Usage) -> Usage:
        """What was used since ``other`` (a snapshot taken before)."""
        since = Usage(**{name: value - getattr(other, name) for name, value in self})
        since.cost_usd = round(since.cost_usd, 6)
        return since


Outcome = Literal["added", "changed", "unchanged", "duplicate", "failed"]


class DocumentOutcome(BaseModel):
    """What happened to one input of an ingest (a file, a URL or a record)."""

    input: str = Field(description="The file name, URL or record index.")
    outcome: Outcome
    document_id: str | None = None
    chunks: int = 0
    matching_texts: int = 0
    error: str | None = Field(None, description="Why it failed, or what it duplicates.")

    def summary(self) -> dict[str, str]:
        """A short account for an agent: input, status and a one-line detail."""
        if self.outcome in ("failed", "duplicate"):
            detail = self.error or ""
        elif self.outcome == "unchanged":
            detail = "already stored"
        else:
            detail = f"stored as {self.chunks} chunk{'' if self.chunks == 1 else 's'}"
        return {"input": self.input, "status": self.outcome, "detail": detail}


class IngestReport(BaseModel):
    """What an ingest did: counts, skips, failures and what it cost.

    ``planned`` is how many documents the run found to read (known before the first one
    is done, so a progress bar can size itself from the first progress callback).
    """

    planned: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    chunks: int = 0
    matching_texts: int = 0
    document_tokens: int = 0  # of the documents written, ~4 characters a token
    near_duplicate_chunks: int = 0
    # matching texts of the documents written: embedded now, or reused from the stored
    # version of the same document (same text, same model: same vector)
    texts_embedded: int = 0
    texts_reused: int = 0
    repaired: int = 0
    document_ids: list[str] = Field(default_factory=list)  # stored or unchanged, in order
    duplicates: list[SkippedDocument] = Field(default_factory=list)
    failed: list[FailedDocument] = Field(default_factory=list)
    # files a folder walk passed over (an unsupported type, a binary blob, no text): how
    # many by reason, and which (their ``error`` says why)
    skipped: dict[str, int] = Field(default_factory=dict)
    skipped_files: list[FailedDocument] = Field(default_factory=list)
    outcomes: list[DocumentOutcome] = Field(default_factory=list)  # one per input, in order
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    index_seconds: float = 0.0  # of ``seconds``, building the search index at the end
    # of ``unchanged``: items their source said were unchanged (an HTTP 304, a file of the
    # same size and mtime), so their stored copy was used: nothing fetched or parsed
    not_modified: int = 0
    removed: list[str] = Field(default_factory=list)  # URIs ``prune`` removed (gone)
    warnings: list[str] = Field(default_factory=list)  # what the run could not do, and why

    @classmethod
    def combined(cls, reports: list[IngestReport]) -> IngestReport:
        """One report for runs made one after another (counts summed, lists joined)."""
        data: dict[str, Any] = {}
        for report in reports:
            for name, value in report:
                if isinstance(value, list):
                    data[name] = data.get(name, []) + value
                elif isinstance(value, dict):
                    counts = data.setdefault(name, {})
                    for key, count in value.items():
                        counts[key] = counts.get(key, 0) + count
                elif isinstance(value, Usage):
                    usage = data.get(name, {})
                    data[name] = {k: usage.get(k, 0) + v for k, v in value}
                else:
                    data[name] = data.get(name, 0) + value
        return cls.model_validate(data)

    # -- what happened to each input (counts and outcomes kept together) ---------------
    def record_failed(self, failure: FailedDocument) -> None:
        if failure.skipped is not None:
            self.skipped[failure.skipped] = self.skipped.get(failure.skipped, 0) + 1
            self.skipped_files.append(failure)
            return
        self.failed.append(failure)
        self.outcomes.append(
            DocumentOutcome(input=failure.uri, outcome="failed", error=failure.error)
        )

    def record_duplicate(self, skipped: SkippedDocument) -> None:
        self.duplicates.append(skipped)
        self.outcomes.append(
            DocumentOutcome(
                input=skipped.uri,
                outcome="duplicate",
                document_id=skipped.document_id,
                error=skipped.reason,
            )
        )

    def record_unchanged(self, document_id: str, uri: str) -> None:
        self.unchanged += 1
        self.document_ids.append(document_id)
        self.outcomes.append(
            DocumentOutcome(input=uri, outcome="unchanged", document_id=document_id)
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def llm_calls_per_chunk(self) -> float:
        """LLM calls made per chunk written (questions and qualifying text together)."""
        return round(self.usage.calls / self.chunks, 3) if self.chunks else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cost_per_million_document_tokens(self) -> float | None:
        if not self.document_tokens:
            return None
        return round(self.usage.cost_usd * 1_000_000 / self.document_tokens, 4)

    def record_stored(
        self,
        document_id: str,
        uri: str,
        *,
        changed: bool,
        chunks: int,
        matching_texts: int,
        document_tokens: int = 0,
    ) -> None:
        self.document_tokens += document_tokens
        if changed:
            self.changed += 1
        else:
            self.added += 1
        self.document_ids.append(document_id)
        self.chunks += chunks
        self.matching_texts += matching_texts
        self.outcomes.append(
            DocumentOutcome(
                input=uri,
                outcome="changed" if changed else "added",
                document_id=document_id,
                chunks=chunks,
                matching_texts=matching_texts,
            )
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def documents(self) -> int:
        """Documents written by this run (added or changed)."""
        return self.added + self.changed

    @property
    def processed(self) -> int:
        done = self.documents + self.unchanged + len(self.duplicates) + len(self.failed)
        return done + len(self.skipped_files)

    def outcome(self, label: str, document_id: str | None = None) -> DocumentOutcome:
        """The outcome of a one-document run, under ``label``; one rule for every interface.

        ``document_id`` names the document when the run cannot (a record given its id).
        """
        if len(self.outcomes) == 1:
            one = self.outcomes[0]
            return one.model_copy(
                update={"input": label, "document_id": one.document_id or document_id}
            )
        if self.failed:
            error = "; ".join(f.error for f in self.failed)
            return DocumentOutcome(input=label, outcome="failed", error=error)
        if self.duplicates:
            reason = self.duplicates[0].reason
            return DocumentOutcome(input=label, outcome="duplicate", error=reason)
        kind: Outcome
        if self.added:
            kind = "added"
        elif self.changed:
            kind = "changed"
        elif self.unchanged:
            kind = "unchanged"
        else:
            return DocumentOutcome(input=label, outcome="failed", error="nothing was ingested")
        return DocumentOutcome(
            input=label,
            outcome=kind,
            document_id=self.document_ids[0] if self.document_ids else document_id,
            chunks=self.chunks,
            matching_texts=self.matching_texts,
        )


DocumentStatus = Literal["pending", "complete", "failed", "removing"]


SyncOutcome = Literal["done", "failed", "skipped"]


class SourceSync(BaseModel):
    """One source's part of a sync: ``done`` (its ingest ran; ``report`` says what it
    stored, removed and spent), ``failed`` (``reason`` says why; what it stored before
    stays) or ``skipped`` (it cannot list itself without inputs: ``reason`` says what
    to set)."""

    name: str
    type: str
    started: datetime
    seconds: float = 0.0
    outcome: SyncOutcome
    reason: str | None = None
    prune: bool = Field(
        False,
        description="Its listing is the whole source, so what is gone was removed "
        "(unless the report's warnings say why not).",
    )
    report: IngestReport | None = None


class SyncReport(BaseModel):
    """What ``KnowledgeBase.sync`` did, per source, in the order of the config."""

    tenant: str
    sources: list[SourceSync] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """No source failed and no document failed (the CLI exits 0)."""
        return all(
            s.outcome != "failed" and (s.report is None or not s.report.failed)
            for s in self.sources
        )

    @property
    def total(self) -> IngestReport:
        """The sources' ingest reports as one (counts summed, lists joined)."""
        return IngestReport.combined([s.report for s in self.sources if s.report is not None])


WatchEventKind = Literal["synced", "watching", "not_watched", "gone", "back"]


class WatchEvent(BaseModel):
    """What ``KnowledgeBase.watch`` reports as it goes: a source it ``synced`` (``sync``
    says how; ``paths`` are the changes that caused it, none for the first sync), one it
    is ``watching`` (``paths``: its folders and files) or that is ``not_watched``
    (``reason``), and a watched path ``gone`` (missing, or not readable: ``reason``) or
    ``back``, watched again. A sync that ``failed`` keeps its changes and is tried
    again in ``retry_seconds``."""

    kind: WatchEventKind
    source: str
    paths: list[str] = Field(default_factory=list)
    reason: str | None = None
    sync: SourceSync | None = None
    retry_seconds: float | None = None


class CostEstimate(BaseModel):
    """What indexing some documents would take: chunks, LLM calls and their price."""

    documents: int = 0
    chunks: int = 0
    document_tokens: int = 0  # the documents' own text, ~4 characters a token
    llm_calls: int = 0  # calls that would be made and paid for
    cached_calls: int = 0  # chunk answers the LLM cache already holds: free
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_models: list[str] = Field(default_factory=list)  # not in litellm's cost map
    # what the real run would fail on, each with the reason it would give (a missing path,
    # an unsupported type, over the size cap...), and the files a folder walk would pass
    # over, by reason: a dry run shows them and exits as the real run would
    failed: list[FailedDocument] = Field(default_factory=list)
    skipped: dict[str, int] = Field(default_factory=dict)
    removed: list[str] = Field(default_factory=list)  # with prune: what it would remove
    warnings: list[str] = Field(default_factory=list)  # with prune: why it would not

    @computed_field  # type: ignore[prop-decorator]
    @property
    def calls_per_chunk(self) -> float:
        """LLM calls an ingest would make per chunk (cached chunks need none)."""
        return round(self.llm_calls / self.chunks, 3) if self.chunks else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cost_per_million_document_tokens(self) -> float | None:
        if not self.document_tokens:
            return None
        return round(self.cost_usd * 1_000_000 / self.document_tokens, 4)


class ReindexPlan(BaseModel):
    """What ``reindex`` found: which documents the current chains would index differently."""

    tenant: str
    source: str | None = None
    documents: int = 0  # looked at
    stale: list[str] = Field(default_factory=list)  # ids whose version would change
    missing: list[str] = Field(default_factory=list)  # stale, with no archived copy to re-read
    estimate: CostEstimate = Field(default_factory=CostEstimate)


class DocumentRecord(BaseModel):
    """A document's entry in the knowledge base: identity, state and counts.

    ``version`` is the committed version readers see; ``pending_version`` is set while a
    new version is written (and until the old one is cleaned up), so an interrupted run
    can be repaired.
    """

    id: str
    source: str
    uri: str
    title: str = ""
    content_hash: str
    version: str | None = None
    pending_version: str | None = None
    status: DocumentStatus = "pending"
    chunks: int = 0
    matching_texts: int = 0
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    updated_at: str = ""
    # who may read it, as stored access tokens (flexmatch.access); None: the whole tenant
    access: list[str] | None = None


class ChunkView(BaseModel):
    """A stored chunk with everything that was derived from it."""

    id: str
    index: int
    heading_path: list[str]
    content: str
    qualifying_text: str
    matching_texts: list[MatchingText]
    location: Location | None = None


class DocumentDetail(BaseModel):
    """``docs show``: a document's record and its chunks."""

    document: DocumentRecord
    chunks: list[ChunkView]


class ChainUse(BaseModel):
    """One chain a knowledge base resolves to: where it is used and which file defines it."""

    where: str  # "source NAME" or "query"
    kind: str
    chain: str
    type: str
    file: str


class SourceStats(BaseModel):
    documents: int = 0
    chunks: int = 0
    matching_texts: int = 0


class Stats(BaseModel):
    """``stats``: what one tenant holds."""

    tenant: str
    documents: int
    incomplete_documents: int
    chunks: int
    matching_texts: int
    sources: dict[str, SourceStats]
    store_bytes: int | None


JobStatus = Literal["queued", "running", "done", "failed"]
JobKind = Literal["upload", "url", "records", "reindex", "sync"]


class JobCounts(BaseModel):
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    duplicates: int = 0
    failed: int = 0
    chunks: int = 0
    matching_texts: int = 0


class Job(BaseModel):
    """A background ingest on a server (``GET /v1/jobs/{id}``) and its progress: what the
    service keeps and answers, and what ``flexmatch.Client`` reads back."""

    id: str
    kind: JobKind
    status: JobStatus = "queued"
    source: str | None = None
    total: int
    processed: int = 0
    counts: JobCounts = Field(default_factory=JobCounts)
    documents: list[DocumentOutcome] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage, description="LLM calls, tokens and cost.")
    error: str | None = None
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    updated_at: str | None = Field(
        None, description="The last sign of life from the server running the job."
    )

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")

    def report(self) -> IngestReport:
        """The job as the ``IngestReport`` an embedded ingest of the same inputs returns."""
        report = IngestReport(planned=self.total, usage=self.usage.model_copy())
        for outcome in self.documents:
            if outcome.outcome in ("added", "changed"):
                report.record_stored(
                    outcome.document_id or "",
                    outcome.input,
                    changed=outcome.outcome == "changed",
                    chunks=outcome.chunks,
                    matching_texts=outcome.matching_texts,
                )
            elif outcome.outcome == "unchanged":
                report.record_unchanged(outcome.document_id or "", outcome.input)
            elif outcome.outcome == "duplicate":
                skipped = SkippedDocument(
                    uri=outcome.input,
                    document_id=outcome.document_id or "",
                    reason=outcome.error or "duplicate",
                )
                report.record_duplicate(skipped)
            else:
                failure = FailedDocument(uri=outcome.input, error=outcome.error or "failed")
                report.record_failed(failure)
        if self.error:
            report.warnings.append(f"job {self.id}: {self.error}")
        report.seconds = _seconds_between(self.started_at, self.finished_at)
        return report


def _seconds_between(start: str | None, end: str | None) -> float:
    try:
        begun = datetime.fromisoformat(start or "")
        ended = datetime.fromisoformat(end or "")
    except ValueError:
        return 0.0
    return round(max(0.0, (ended - begun).total_seconds()), 3)
