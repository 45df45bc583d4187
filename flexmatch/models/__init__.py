"""The data that flows through FlexMatch, one model per stage.

load → ``Document`` (made of ``Element``s) → chunk → ``Section`` → enrich → ``Chunk``
(with its ``MatchingText``s and qualifying text) → embed + store; a query comes back as
``SearchResult``s.

One module per kind of shape (documents, chunks, reports, sync, estimates, records,
jobs); they import only each other, pydantic and the standard library, so any module
of FlexMatch may use them. Import them from here.
"""

from __future__ import annotations

from flexmatch.models.chunks import (
    MATCH_KINDS,
    Chunk,
    Learned,
    Mark,
    MatchingText,
    MatchKind,
    SearchResult,
    Signals,
    cite,
    cite_name,
    shared_fields,
)
from flexmatch.models.documents import (
    ELEMENTS_A_JOIN,
    Document,
    Element,
    ElementKind,
    Location,
    ParsedDocument,
    Section,
    SectionPart,
    joined_text,
)
from flexmatch.models.estimates import (
    CostEstimate,
    ReindexPlan,
)
from flexmatch.models.jobs import (
    Job,
    JobCounts,
    JobKind,
    JobStatus,
)
from flexmatch.models.querylog import (
    FeedbackEvent,
    Gap,
    GoldenExpect,
    GoldenItem,
    LogEntry,
    LoggedResult,
)
from flexmatch.models.reading import (
    EXPAND_MODES,
    ExpandedContext,
    ExpandMode,
    GrepHit,
    GrepRequest,
    GrepResult,
    Outline,
    OutlineEntry,
    ReadChunk,
    Reading,
    ReadRequest,
)
from flexmatch.models.records import (
    ChainUse,
    ChunkView,
    DocumentDetail,
    DocumentRecord,
    DocumentStatus,
    FeedbackReceipt,
    SourceStats,
    Stats,
)
from flexmatch.models.reports import (
    TOO_LARGE,
    DocumentOutcome,
    FailedDocument,
    IngestReport,
    Outcome,
    SkippedDocument,
    Usage,
)
from flexmatch.models.sync import (
    SourceSync,
    SyncOutcome,
    SyncReport,
    WatchEvent,
    WatchEventKind,
)

__all__ = [
    "ELEMENTS_A_JOIN",
    "EXPAND_MODES",
    "MATCH_KINDS",
    "TOO_LARGE",
    "ChainUse",
    "Chunk",
    "ChunkView",
    "CostEstimate",
    "Document",
    "DocumentDetail",
    "DocumentOutcome",
    "DocumentRecord",
    "DocumentStatus",
    "Element",
    "ElementKind",
    "ExpandMode",
    "ExpandedContext",
    "FailedDocument",
    "FeedbackEvent",
    "FeedbackReceipt",
    "Gap",
    "GoldenExpect",
    "GoldenItem",
    "GrepHit",
    "GrepRequest",
    "GrepResult",
    "IngestReport",
    "Job",
    "JobCounts",
    "JobKind",
    "JobStatus",
    "Learned",
    "Location",
    "LogEntry",
    "LoggedResult",
    "Mark",
    "MatchKind",
    "MatchingText",
    "Outcome",
    "Outline",
    "OutlineEntry",
    "ParsedDocument",
    "ReadChunk",
    "ReadRequest",
    "Reading",
    "ReindexPlan",
    "SearchResult",
    "Section",
    "SectionPart",
    "Signals",
    "SkippedDocument",
    "SourceStats",
    "SourceSync",
    "Stats",
    "SyncOutcome",
    "SyncReport",
    "Usage",
    "WatchEvent",
    "WatchEventKind",
    "cite",
    "cite_name",
    "joined_text",
    "shared_fields",
]
