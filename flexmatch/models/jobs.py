"""A background ingest on a server, as the service keeps it and the client reads it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from flexmatch.models.reports import (
    DocumentOutcome,
    FailedDocument,
    IngestReport,
    SkippedDocument,
    Usage,
)

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
