"""Ingest jobs: accepted at once, run in the background, polled by id.

An upload or import can take minutes (LLM calls per chunk), longer than a client should
hold a request open. A job is a list of work items, one per document (a file, a URL or
a record), each ingested by its own ``KnowledgeBase`` call, so the job can say exactly
which document was added, changed, unchanged, skipped as a duplicate or failed, and why.
Jobs live in memory on the server's event loop: a restart forgets them (the documents
they stored stay stored).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from flexmatch import DocumentOutcome, FlexMatchError, IngestReport
from flexmatch.adapters.http.writes import TenantWriter

log = logging.getLogger("flexmatch.adapters.http")

JobStatus = Literal["queued", "running", "done", "failed"]
JobKind = Literal["upload", "url", "records"]


class JobCounts(BaseModel):
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    duplicates: int = 0
    failed: int = 0
    chunks: int = 0
    matching_texts: int = 0


class Job(BaseModel):
    """A background ingest and its progress; the tenant is never shown."""

    id: str
    kind: JobKind
    status: JobStatus = "queued"
    source: str | None = None
    total: int
    processed: int = 0
    counts: JobCounts = Field(default_factory=JobCounts)
    documents: list[DocumentOutcome] = Field(default_factory=list)
    error: str | None = None
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    tenant: str = Field(exclude=True)


@dataclass
class WorkItem:
    """One document to ingest: a label for the report, the call, and its id when known."""

    label: str
    ingest: Callable[[], Awaitable[IngestReport]]
    document_id: str | None = None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _count(counts: JobCounts, outcome: DocumentOutcome) -> None:
    match outcome.outcome:
        case "added":
            counts.added += 1
        case "changed":
            counts.changed += 1
        case "unchanged":
            counts.unchanged += 1
        case "duplicate":
            counts.duplicates += 1
        case "failed":
            counts.failed += 1
    counts.chunks += outcome.chunks
    counts.matching_texts += outcome.matching_texts


class JobRegistry:
    """The jobs of one server: submitted, run as tasks on its loop, kept for polling."""

    def __init__(self, writer: TenantWriter, keep: int = 1_000) -> None:
        self.writer = writer
        self.keep = keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def submit(
        self, tenant: str, kind: JobKind, items: list[WorkItem], source: str | None = None
    ) -> Job:
        """Register a job and start it; it runs after earlier writes to the same tenant."""
        job = Job(
            id=secrets.token_hex(8),
            kind=kind,
            source=source,
            total=len(items),
            created_at=_now(),
            tenant=tenant,
        )
        self._jobs[job.id] = job
        self._forget_old()
        task = asyncio.get_running_loop().create_task(self._run(job, items))
        self._tasks[job.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job.id, None))
        return job

    def get(self, tenant: str, job_id: str) -> Job | None:
        """The job, or None when there is none with that id in this tenant."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.tenant == tenant else None

    def list(self, tenant: str) -> list[Job]:
        return [job for job in reversed(self._jobs.values()) if job.tenant == tenant]

    async def _run(self, job: Job, items: list[WorkItem]) -> None:
        try:
            items.reverse()
            while items:
                item = items.pop()  # dropped once done: an upload's bytes are freed early
                async with self.writer.write(job.tenant):
                    if job.status == "queued":
                        job.status, job.started_at = "running", _now()
                    outcome = await self._one(item)
                job.documents.append(outcome)
                _count(job.counts, outcome)
                job.processed += 1
            job.status = "done"
        except asyncio.CancelledError:
            job.status, job.error = "failed", "the server shut down before the job finished"
            raise
        except Exception as exc:  # pragma: no cover - _one catches what it can
            log.error("job %s failed", job.id, exc_info=exc)
            job.status, job.error = "failed", "internal error (see the server log)"
        finally:
            job.finished_at = _now()

    @staticmethod
    async def _one(item: WorkItem) -> DocumentOutcome:
        try:
            return (await item.ingest()).outcome(item.label, item.document_id)
        except FlexMatchError as exc:
            return DocumentOutcome(input=item.label, outcome="failed", error=str(exc))
        except Exception as exc:
            log.error("ingesting %s failed", item.label, exc_info=exc)
            error = "internal error (see the server log)"
            return DocumentOutcome(input=item.label, outcome="failed", error=error)

    def _forget_old(self) -> None:
        """Drop the oldest finished jobs beyond ``keep``; running ones stay."""
        finished = [j.id for j in self._jobs.values() if j.status in ("done", "failed")]
        for job_id in finished[: max(0, len(self._jobs) - self.keep)]:
            del self._jobs[job_id]

    async def close(self) -> None:
        """Cancel what is still running (on shutdown)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
