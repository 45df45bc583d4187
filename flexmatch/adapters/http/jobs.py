"""Ingest jobs: accepted at once, run in the background, polled by id.

An upload or import can take minutes (LLM calls per chunk), longer than a client should
hold a request open. A job is a list of work items, one per document (a file, a URL or
a record), each ingested by its own ``KnowledgeBase`` call, so the job can say exactly
which document was added, changed, unchanged, skipped as a duplicate or failed, and why.
A job may instead hold one item that writes through a whole knowledge-base call (a
re-index): it reports its own progress and per-document outcomes. Every job sums the LLM
usage of its writes, so it can say what it cost.

A job runs as a task in the server process that accepted it, and its record lives in the
service's shared state (``SharedState.jobs``), so every replica answers for it. The
running process saves the record when the job starts, after each document and when it
ends, and beats every ``heartbeat`` seconds (saving progress a re-index reports in
between). If that process dies, the record stops beating: the first replica to read it
``lost_after`` seconds later marks it failed, saying so (the documents it finished stay
stored). ``updated_at`` shows the last beat.

Waiting work is bounded per tenant, in each process: at most ``max_jobs`` jobs not yet
ended and ``max_bytes`` of upload bytes waiting in the spool folder (``spool``: on disk,
never in memory). Past either cap ``reserve`` refuses the job (a 429 with
``Retry-After``); other tenants are not affected. A job reads its inputs only once its
turn in the tenant's write order has come, and at most ``readers`` inputs ahead of the
one being written, so queued jobs hold no parsed documents either.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import secrets
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from flexmatch import (
    Document,
    DocumentOutcome,
    FailedDocument,
    FlexMatchError,
    IngestReport,
    Job,
    JobCounts,
    JobKind,
    KnowledgeBase,
    Principal,
)
from flexmatch.adapters.http.errors import ApiError
from flexmatch.adapters.http.metrics import Metrics
from flexmatch.adapters.http.spool import UploadSpool
from flexmatch.adapters.http.writes import TenantWriter, Ticket
from flexmatch.service import JobRecord, SharedState

log = logging.getLogger("flexmatch.adapters.http")
SPOOL_DIR = Path(".flexmatch") / "spool"  # in the knowledge base's folder


class TenantJob(Job):
    """A job as the service keeps it: the public job, its tenant and who started it
    (never shown)."""

    tenant: str = Field(exclude=True)
    # the key (and end user) that started it; only it and admin keys see the job (see
    # docs/security.md, "Access control"); None: admins only (jobs of older versions)
    owner: str | None = Field(None, exclude=True)


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


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="seconds")


_OWN_COLUMNS = {"id", "status", "documents", "updated_at"}  # stored beside the body


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


def spool_folder(kb: KnowledgeBase | None) -> Path:
    """Where uploads wait: ``service.queue.spool_dir``, or ``<kb>/.flexmatch/spool`` (on
    the knowledge base's disk, not a tmpfs that would hold them in memory again); a
    registry without a knowledge base (tests of the job records) uses the temp folder."""
    if kb is None:
        return Path(tempfile.gettempdir()) / "flexmatch-spool"
    configured = kb.config.service.queue.spool_dir
    return Path(configured) if configured else kb.path / SPOOL_DIR


def queue_full(code: str, message: str, retry_after: int) -> ApiError:
    """A tenant has as much work waiting as its cap allows: a 429 whose ``code`` names the
    cap, with ``Retry-After``, wherever a job is submitted (API, console)."""
    return ApiError(429, code, message, headers={"Retry-After": str(retry_after)})


@dataclass
class Reservation:
    """A job's place in its tenant's caps, held from acceptance until the job ends."""

    tenant: str
    bytes: int = 0  # spooled bytes not yet read back
    folder: Path | None = None  # the job's spool folder
    released: bool = False


@dataclass
class _Running:
    """A job this process runs: the live model, and how much of it is saved."""

    job: TenantJob
    saved_documents: int = 0
    task: asyncio.Task[None] | None = None
    # who writes (``ApiKey.writer``): the knowledge base replaces no stored document it
    # may not read (None: an admin key, which may)
    writer: Principal | None = None


class JobRegistry:
    """The jobs of one server: submitted, run as tasks on its loop, recorded in the shared
    state for polling from any replica.

    A job's inputs are read concurrently (up to ``readers`` at once) once the tenant's
    earlier writes are done, and written in the order they were accepted."""

    def __init__(
        self,
        kb: KnowledgeBase,
        writer: TenantWriter,
        ready: Callable[[], Awaitable[None]],
        shared: SharedState,
        keep: int = 1_000,
        readers: int = 4,
        heartbeat: float = 5.0,
        lost_after: float = 60.0,
        clock: Callable[[], int] = time.time_ns,
        spool: UploadSpool | None = None,
        max_jobs: int = 16,
        max_bytes: int = 1_000_000_000,
        retry_after: int = 30,
        metrics: Metrics | None = None,
    ) -> None:
        self.kb = kb
        self.metrics = metrics
        self.writer = writer
        self.ready = ready
        self.records = shared.jobs
        self.keep = keep
        self.readers = readers
        self.heartbeat = heartbeat
        self.lost_after = lost_after
        self.clock = clock
        self._running: dict[str, _Running] = {}
        self._saving = asyncio.Lock()  # one save at a time, so none overtakes another
        self._beat: asyncio.Task[None] | None = None
        self.spool = spool or UploadSpool(spool_folder(kb))
        self.spool.sweep()  # what a killed server left behind
        self.max_jobs = max_jobs
        self.max_bytes = max_bytes
        self.retry_after = retry_after
        self._jobs_waiting: Counter[str] = Counter()
        self._bytes_waiting: Counter[str] = Counter()

    def counts(self) -> Counter[str]:
        """How many of the jobs this process runs are queued and how many running."""
        return Counter(r.job.status for r in self._running.values())

    def waiting(self, tenant: str) -> tuple[int, int]:
        """The tenant's jobs not yet ended and upload bytes still spooled, in this process."""
        return self._jobs_waiting[tenant], self._bytes_waiting[tenant]

    def reserve(self, tenant: str, nbytes: int = 0) -> Reservation:
        """Count a new job of ``nbytes`` upload bytes against the tenant's caps, or raise
        a 429 ``ApiError`` naming the cap it would pass. Release it (``release``) if the job is
        never submitted; a submitted job releases it when it ends."""
        jobs, queued = self.waiting(tenant)
        if jobs >= self.max_jobs:
            raise queue_full(
                "too_many_queued_jobs",
                f"this tenant already has {jobs} jobs waiting or running, the cap "
                f"(service.queue.max_jobs_per_tenant: {self.max_jobs}); retry when one has "
                "finished (GET /v1/jobs)",
                self.retry_after,
            )
        if queued + nbytes > self.max_bytes:
            raise queue_full(
                "too_many_queued_bytes",
                f"this upload ({nbytes:,} bytes) and the {queued:,} bytes of uploads this "
                f"tenant already has waiting pass the cap (service.queue.max_bytes_per_tenant:"
                f" {self.max_bytes:,} bytes); retry when its jobs have read them",
                self.retry_after,
            )
        self._jobs_waiting[tenant] += 1
        self._bytes_waiting[tenant] += nbytes
        return Reservation(tenant=tenant, bytes=nbytes)

    def consumed(self, reservation: Reservation, nbytes: int) -> None:
        """``nbytes`` of the reservation's spooled files were read back and removed."""
        nbytes = min(nbytes, reservation.bytes)
        reservation.bytes -= nbytes
        self._decrement(self._bytes_waiting, reservation.tenant, nbytes)

    def release(self, reservation: Reservation) -> None:
        """The job ended (or was never submitted): its place and its files go."""
        if reservation.released:
            return
        reservation.released = True
        self._decrement(self._jobs_waiting, reservation.tenant, 1)
        self.consumed(reservation, reservation.bytes)
        if reservation.folder is not None:
            self.spool.remove(reservation.folder)

    @staticmethod
    def _decrement(counter: Counter[str], tenant: str, amount: int) -> None:
        counter[tenant] -= amount
        if counter[tenant] <= 0:
            del counter[tenant]

    async def submit(
        self,
        tenant: str,
        kind: JobKind,
        items: list[WorkItem],
        source: str | None = None,
        total: int | None = None,
        reservation: Reservation | None = None,
        owner: str | None = None,
        writer: Principal | None = None,
    ) -> TenantJob:
        """Register a job and start it; its writes queue behind earlier writes to the tenant.
        ``total`` is how many documents it will process when that is not one per item.
        ``reservation``: its place in the tenant's caps, taken now when not given (this
        may raise the 429); released when the job ends. ``owner``: who may follow it
        besides admins (``owner_of``); ``writer``: who it writes as (None: an admin)."""
        reservation = reservation or self.reserve(tenant)
        try:
            return await self._submit(
                tenant, kind, items, source, total, reservation, owner, writer
            )
        except BaseException:
            self.release(reservation)
            raise

    async def _submit(
        self,
        tenant: str,
        kind: JobKind,
        items: list[WorkItem],
        source: str | None,
        total: int | None,
        reservation: Reservation,
        owner: str | None = None,
        writer: Principal | None = None,
    ) -> TenantJob:
        now = self.clock()
        job = TenantJob(
            id=secrets.token_hex(8),
            kind=kind,
            source=source,
            total=len(items) if total is None else total,
            created_at=_now(),
            updated_at=_iso(now),
            tenant=tenant,
            owner=owner,
        )
        record = JobRecord(
            id=job.id,
            tenant=tenant,
            status=job.status,
            created_ns=now,
            heartbeat_ns=now,
            body=_body(job),
        )
        # the shared database may be busy or remote: never wait for it on the event loop
        await asyncio.to_thread(self.records.create, record)
        await asyncio.to_thread(self.records.prune, self.keep)
        tickets = [self.writer.ticket(tenant) for _ in items]  # the order of acceptance
        running = _Running(job, writer=writer)
        self._running[job.id] = running
        loop = asyncio.get_running_loop()
        running.task = loop.create_task(self._run(running, items, tickets, reservation))
        if self._beat is None or self._beat.done():
            self._beat = loop.create_task(self._beat_while_running())
        return job

    def ending(self, job_id: str) -> Awaitable[TenantJob | None]:
        """What to await for the job this process runs to end: the job, then (a job
        cancelled on shutdown ends too, marked failed). Call it as soon as ``submit``
        returns: a job that has ended and been forgotten gives None."""
        running = self._running.get(job_id)

        async def ended() -> TenantJob | None:
            if running is None or running.task is None:
                return None
            await asyncio.wait([running.task])
            return running.job

        return ended()

    def get(self, tenant: str, job_id: str) -> TenantJob | None:
        """The job, or None when there is none with that id in this tenant."""
        record = self.records.get(tenant, job_id)
        return None if record is None else self._job(record)

    def list(self, tenant: str) -> list[TenantJob]:
        """The tenant's jobs, newest first."""
        return [self._job(record) for record in self.records.list(tenant, self.keep)]

    # below, ``list`` is the method above: annotations say ``builtins.list``

    def _job(self, record: JobRecord, *, recheck: bool = True) -> TenantJob:
        job = TenantJob(
            id=record.id,
            status=record.status,
            documents=[DocumentOutcome.model_validate(d) for d in record.documents],
            updated_at=_iso(record.heartbeat_ns),
            tenant=record.tenant,
            **record.body,
        )
        silent = (self.clock() - record.heartbeat_ns) / 1e9
        lost = silent > self.lost_after and record.id not in self._running
        if job.status not in ("queued", "running") or not lost:
            return job
        job.status, job.finished_at = "failed", _now()
        job.error = (
            f"the server running this job stopped (no sign of life since {job.updated_at}); "
            "the documents listed as done are stored, the others were not: submit them again"
        )
        if self.records.declare_lost(record, _body(job)) or not recheck:
            log.warning("job %s lost its server; marked failed", job.id)
            return job
        fresh = self.records.get(record.tenant, record.id)  # it beat meanwhile: read it again
        return job if fresh is None else self._job(fresh, recheck=False)

    async def _save(self, running: _Running) -> None:
        """Write the job's record and its new outcomes; a job another replica declared
        lost (this process stalled past ``lost_after``) is stopped."""
        async with self._saving:
            job = running.job
            first = running.saved_documents
            new = [
                (first + i, outcome.model_dump(mode="json"))
                for i, outcome in enumerate(job.documents[first:])
            ]
            now = self.clock()
            job.updated_at = _iso(now)
            ours = await asyncio.to_thread(
                self.records.save, job.id, job.status, _body(job), now, new
            )
            running.saved_documents += len(new)
        stoppable = running.task is not None and not running.task.done()
        if not ours and stoppable and job.status in ("queued", "running"):
            log.warning("job %s was declared lost by another replica; stopping it", job.id)
            assert running.task is not None
            running.task.cancel()

    async def _beat_while_running(self) -> None:
        while self._running:
            await asyncio.sleep(self.heartbeat)
            for running in list(self._running.values()):
                if running.job.status not in ("queued", "running"):
                    continue
                try:
                    await self._save(running)
                except Exception as exc:  # the state database is down: beat again later
                    log.warning("job %s: saving its heartbeat failed: %s", running.job.id, exc)

    async def _run(
        self,
        running: _Running,
        items: builtins.list[WorkItem],
        tickets: builtins.list[Ticket],
        reservation: Reservation,
    ) -> None:
        job = running.job

        async def read(item: WorkItem) -> list[Document | FailedDocument]:
            try:
                return await item.read()
            except FlexMatchError as exc:
                return [FailedDocument(uri=item.label, error=str(exc))]

        reads: list[asyncio.Future[list[Document | FailedDocument]] | None] = [None] * len(items)

        def read_ahead(index: int) -> None:
            """Start the reads of items ``index`` to ``index + readers - 1`` (at most
            ``readers`` inputs are read or held at once)."""
            for ahead in range(index, min(index + self.readers, len(items))):
                if reads[ahead] is None:
                    reads[ahead] = asyncio.ensure_future(read(items[ahead]))

        try:
            job.status, job.started_at = "running", _now()
            await self._save(running)
            if tickets:  # read nothing before the tenant's earlier writes are done
                await tickets[0].turn()
            for index, (item, ticket) in enumerate(zip(items, tickets, strict=True)):
                read_ahead(index)
                pending = reads[index]
                assert pending is not None
                documents = await pending
                reads[index] = None  # an upload's bytes are freed early
                async with self.writer.apply(ticket):
                    outcomes = await self._write(item, documents, job, running.writer)
                for outcome in outcomes:
                    job.documents.append(outcome)
                    _count(job.counts, outcome)
                if self.metrics is not None:
                    self.metrics.ingested(outcomes)
                if item.write is None:
                    job.processed += 1  # a write item counts its documents itself
                try:
                    await self._save(running)
                except Exception as exc:  # the state database blinked: the next beat saves
                    log.warning("job %s: saving its progress failed: %s", job.id, exc)
            job.status = "done"
        except asyncio.CancelledError:
            job.status, job.error = "failed", "the server shut down before the job finished"
            raise
        except Exception as exc:
            log.error("job %s failed", job.id, exc_info=exc)
            job.status, job.error = "failed", "internal error (see the server log)"
        finally:
            for ticket in tickets:  # a job that stopped early must not hold up the tenant
                ticket.abandon()
            for waiting in reads:
                if waiting is not None:
                    waiting.cancel()
            await asyncio.gather(*(r for r in reads if r is not None), return_exceptions=True)
            self.release(reservation)  # the job's place in the caps, and its spooled files
            job.finished_at = _now()
            if self.metrics is not None:
                self.metrics.job_finished(job.status)
            try:
                await self._save(running)
            except Exception as exc:  # the state database is gone: say so in the log
                log.error("saving the end of job %s failed", job.id, exc_info=exc)
            self._running.pop(job.id, None)

    async def _write(
        self,
        item: WorkItem,
        documents: builtins.list[Document | FailedDocument],
        job: TenantJob,
        writer: Principal | None = None,
    ) -> builtins.list[DocumentOutcome]:
        def progress(report: IngestReport) -> None:
            job.total = max(job.total, report.planned)
            job.processed = report.processed

        try:
            await self.ready()
            if item.write is not None:
                report = await item.write(job.tenant, progress)
                job.usage.add(report.usage)
                job.total = max(job.total, report.planned)
                job.processed = max(job.processed, report.processed)
                return report.outcomes
            report = await self.kb.aingest_documents(documents, tenant=job.tenant, principal=writer)
            job.usage.add(report.usage)
        except FlexMatchError as exc:
            return [DocumentOutcome(input=item.label, outcome="failed", error=str(exc))]
        except Exception as exc:
            log.error("ingesting %r failed", item.label, exc_info=exc)
            error = "internal error (see the server log)"
            return [DocumentOutcome(input=item.label, outcome="failed", error=error)]
        if len(report.outcomes) > 1:  # a corpus file: one outcome per document in it
            return report.outcomes
        return [report.outcome(item.label, item.document_id)]

    async def close(self) -> None:
        """Cancel what is still running (on shutdown); each job records why it stopped."""
        tasks = [r.task for r in self._running.values() if r.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._beat is not None:
            self._beat.cancel()
            await asyncio.gather(self._beat, return_exceptions=True)
        self.spool.close()


def _body(job: TenantJob) -> dict[str, Any]:
    """What the job record keeps as JSON (the rest has columns of its own)."""
    return {**job.model_dump(mode="json", exclude=_OWN_COLUMNS), "owner": job.owner}


def owner_of(key_id: str, reader: Principal | None) -> str:
    """Who started a job: the key and, for a service key, the end user it named (a
    service key acting for alice does not see bob's jobs)."""
    return key_id if reader is None else f"{key_id} as {reader.key()}"


def visible(job: TenantJob, owner: str | None) -> bool:
    """Whether a caller sees ``job`` (file names, document ids): an admin key (``owner``
    None) sees every job of its tenant, any other key only the jobs it started."""
    return owner is None or job.owner == owner
