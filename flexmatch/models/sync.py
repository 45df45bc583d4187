"""What ``sync`` and ``watch`` report: each source's part of a sync, and the events of a
watch."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from flexmatch.models.reports import IngestReport

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
