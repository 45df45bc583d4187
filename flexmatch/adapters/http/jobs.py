"""Ingest jobs: accepted at once, run in the background, polled by id.

An upload or import can take minutes (LLM calls per chunk), longer than a client should
hold a request open. A job is a list of work items, one per document (a file, a URL or
a record), each ingested by its own ``KnowledgeBase`` call, so the job can say exactly
which document was added, changed, unchanged, skipped as a duplicate or failed, and why.
A job may instead hold one item that writes through a whole knowledge-base call (a
re-index): it reports its own progress and per-document outcomes. Every job sums the LLM
usage of its writes, so it can say what it cost. Jobs live in memory on the server's
event loop: a restart forgets them (the documents they stored stay stored).
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

from flexmatch import (
    Document,
    DocumentOutcome,
    FailedDocument,
    FlexMatchError,
    IngestReport,
    KnowledgeBase,
    Usage,
)
from flexmatch.adapters.http.writes import TenantWriter, Ticket

log = logging.getLogger("flexmatch.adapters.http")

JobStatus = Literal["queued", "running", "done", "failed"]
JobKind = Literal["upload", "url", "records", "reindex"]


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
    usage: Usage = Field(default_factory=Usage, description="LLM calls, tokens and cost.")
    error: str | None = None
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    tenant: str = Field(exclude=True)


Read = Callable[[], Awaitable[list[Document | FailedDocument]]]
Progress = Callable[[IngestReport], None]
# a write that is a whole knowledge-base call for the tenant (a re-index), with progress
Write = Callable[[str, Progress], Awaitable[IngestReport]]


@dataclass
class WorkItem:
    """One input to ingest: a label for the report, how to read it (parse the upload, fetch
    the page) and its document id when known."""

    label: str
    read: Read
    document_id: str | None = None
    write: Write | None = None  # instead of ingesting what ``read`` gave


async def _nothing() -> list[Document | FailedDocument]:
    return []


def write_item(label: str, write: Write) -> WorkItem:
    """A work item with nothing to read that runs ``write`` in the tenant's turn."""
    return WorkItem(label=label, read=_nothing, write=write)


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


def _add_usage(total: Usage, more: Usage) -> None:
    total.calls += more.calls
    total.cached_calls += more.cached_calls
    total.prompt_tokens += more.prompt_tokens
    total.cached_prompt_tokens += more.cached_prompt_tokens
    total.completion_tokens += more.completion_tokens
    total.cost_usd = round(total.cost_usd + more.cost_usd, 6)


class JobRegistry:
    """The jobs of one server: submitted, run as tasks on its loop, kept for polling.

    A job's inputs are read concurrently (up to ``readers`` at once), outside the tenant's
    write order, and written in the order they were accepted."""

    def __init__(
        self,
        kb: KnowledgeBase,
        writer: TenantWriter,
        ready: Callable[[], Awaitable[None]],
        keep: int = 1_000,
        readers: int = 4,
    ) -> None:
        self.kb = kb
        self.writer = writer
        self.ready = ready
        self.keep = keep
        self.readers = readers
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def submit(
        self,
        tenant: str,
        kind: JobKind,
        items: list[WorkItem],
        source: str | None = None,
        total: int | None = None,
    ) -> Job:
        """Register a job and start it; its writes queue behind earlier writes to the tenant.
        ``total`` is how many documents it will process when that is not one per item."""
        job = Job(
            id=secrets.token_hex(8),
            kind=kind,
            source=source,
            total=len(items) if total is None else total,
            created_at=_now(),
            tenant=tenant,
        )
        tickets = [self.writer.ticket(tenant) for _ in items]  # the order of acceptance
        self._jobs[job.id] = job
        self._forget_old()
        task = asyncio.get_running_loop().create_task(self._run(job, items, tickets))
        self._tasks[job.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job.id, None))
        return job

    def get(self, tenant: str, job_id: str) -> Job | None:
        """The job, or None when there is none with that id in this tenant."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.tenant == tenant else None

    def list(self, tenant: str) -> list[Job]:
        return [job for job in reversed(self._jobs.values()) if job.tenant == tenant]

    async def _run(self, job: Job, items: list[WorkItem], tickets: list[Ticket]) -> None:
        slots = asyncio.Semaphore(self.readers)

        async def read(item: WorkItem) -> list[Document | FailedDocument]:
            async with slots:
                try:
                    return await item.read()
                except FlexMatchError as exc:
                    return [FailedDocument(uri=item.label, error=str(exc))]

        reads: list[asyncio.Future[list[Document | FailedDocument]] | None] = [
            asyncio.ensure_future(read(item)) for item in items
        ]
        try:
            job.status, job.started_at = "running", _now()
            for index, (item, ticket) in enumerate(zip(items, tickets, strict=True)):
                pending = reads[index]
                assert pending is not None
                documents = await pending
                reads[index] = None  # an upload's bytes are freed early
                async with self.writer.apply(ticket):
                    outcomes = await self._write(item, documents, job)
                for outcome in outcomes:
                    job.documents.append(outcome)
                    _count(job.counts, outcome)
                if item.write is None:
                    job.processed += 1  # a write item counts its documents itself
            job.status = "done"
        except asyncio.CancelledError:
            job.status, job.error = "failed", "the server shut down before the job finished"
            raise
        except Exception as exc:  # pragma: no cover - _write catches what it can
            log.error("job %s failed", job.id, exc_info=exc)
            job.status, job.error = "failed", "internal error (see the server log)"
        finally:
            for ticket in tickets:  # a job that stopped early must not hold up the tenant
                ticket.abandon()
            for waiting in reads:
                if waiting is not None:
                    waiting.cancel()
            job.finished_at = _now()

    async def _write(
        self, item: WorkItem, documents: list[Document | FailedDocument], job: Job
    ) -> list[DocumentOutcome]:
        def progress(report: IngestReport) -> None:
            job.total = max(job.total, report.planned)
            job.processed = report.processed

        try:
            await self.ready()
            if item.write is not None:
                report = await item.write(job.tenant, progress)
                _add_usage(job.usage, report.usage)
                job.total = max(job.total, report.planned)
                job.processed = max(job.processed, report.processed)
                return report.outcomes
            report = await self.kb.aingest_documents(documents, tenant=job.tenant)
            _add_usage(job.usage, report.usage)
        except FlexMatchError as exc:
            return [DocumentOutcome(input=item.label, outcome="failed", error=str(exc))]
        except Exception as exc:
            log.error("ingesting %r failed", item.label, exc_info=exc)
            error = "internal error (see the server log)"
            return [DocumentOutcome(input=item.label, outcome="failed", error=error)]
        if len(report.outcomes) > 1:  # a corpus file: one outcome per document in it
            return report.outcomes
        return [report.outcome(item.label, item.document_id)]

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
