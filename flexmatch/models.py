"""The data that flows through FlexMatch, one model per stage.

load → ``Document`` (made of ``Element``s) → chunk → ``Section`` → enrich → ``Chunk``
(with its ``MatchingText``s and qualifying text) → embed + store; a query comes back as
``SearchResult``s.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ElementKind = Literal["title", "heading", "paragraph", "list_item", "table", "code"]


class Element(BaseModel):
    """One structural piece of a parsed document, in reading order."""

    model_config = ConfigDict(frozen=True)

    kind: ElementKind
    text: str
    level: int = 0  # heading level (1 = top); 0 for non-headings
    page: int | None = None


class ParsedDocument(BaseModel):
    """What a parser returns: the document's own structure, before any chunking."""

    title: str = ""
    elements: list[Element]
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n\n".join(e.text for e in self.elements)


class Document(BaseModel):
    """A parsed document with its identity: where it came from and what it holds."""

    id: str
    uri: str
    source: str
    title: str
    elements: list[Element]
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n\n".join(e.text for e in self.elements)

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


class Section(BaseModel):
    """A chunker's output: a piece of a document with the headings above it."""

    text: str
    heading_path: list[str] = Field(default_factory=list)


class MatchingText(BaseModel):
    """A short text that is embedded and matched against queries for one chunk."""

    text: str
    kind: Literal["question", "sentence", "keyword", "content", "title"] = "question"


class Chunk(BaseModel):
    """A section after enrichment: what gets stored and returned to the agent."""

    id: str
    document_id: str
    index: int
    text: str
    heading_path: list[str] = Field(default_factory=list)
    qualifying_text: str = ""
    matching_texts: list[MatchingText] = Field(default_factory=list)


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


class FailedDocument(BaseModel):
    """A document that could not be ingested, and why."""

    uri: str
    error: str


class Usage(BaseModel):
    """LLM usage summed over a run."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class IngestReport(BaseModel):
    """What an ingest did: counts, failures and what it cost."""

    documents: int = 0
    chunks: int = 0
    matching_texts: int = 0
    failed: list[FailedDocument] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
