"""What a knowledge base holds, as its listings show it: each document's record, its
stored chunks, the chains in use and per-source counts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from flexmatch.models.chunks import MatchingText
from flexmatch.models.documents import Location

DocumentStatus = Literal["pending", "complete", "failed", "removing"]


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


class FeedbackReceipt(BaseModel):
    """What a feedback call kept: for a helpful mark, the learned matching text it made
    or merged into (``learned_id``; ``merged``: a near-duplicate already stood); for an
    unhelpful one, that the chunk is demoted for queries near this one."""

    chunk_id: str
    helpful: bool
    learned_id: str | None = None
    merged: bool = False
