"""Scheduled syncs: a source with ``schedule`` syncs every interval, as a job.

Each app runs one scheduler task (started and stopped with the app). Every
``Limits.sync_check_seconds`` it looks for sources due a sync: those never synced for a
tenant of their ``schedule_tenants`` (so a new schedule runs when the service starts),
and those whose last run started an interval ago or more. Before running one it takes the
source's lease in the shared state (``flexmatch.service.syncs``): a replica that cannot
take it skips, as another runs that sync. The sync is a job of kind ``sync`` (in
``GET /v1/jobs``, in the tenant's write order); while it runs the lease is renewed, and
when it ends its outcome, counts and cost are recorded as the source's last run and the
lease is released. "Sync now" (``POST /v1/sources/{name}/sync``, the console's button)
runs the same way, at once, or answers 409 while a sync of the source runs anywhere.

On shutdown the scheduler takes no new run, the job registry cancels the running jobs
(marked failed: the server shut down), and each run is recorded ``interrupted`` and its
lease released, so another replica may sync the source at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from flexmatch import FlexMatchError, IngestReport, KnowledgeBase, SourceSync
from flexmatch.adapters.http.errors import ApiError
from flexmatch.adapters.http.jobs import JobRegistry, Progress, TenantJob, Write, write_item
from flexmatch.adapters.http.schemas import SourceStatus
from flexmatch.service import SyncLease, SyncRun, SyncState

log = logging.getLogger("flexmatch.adapters.http")
LEASE_SECONDS = 60.0  # a lease its holder stopped renewing is free again after this long

Trigger = Literal["schedule", "request"]


def iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="seconds")


def sync_running(source: str, tenant: str, lease: SyncLease | None = None) -> ApiError:
    job = f" (job {lease.job_id})" if lease is not None and lease.job_id else ""
    return ApiError(
        409,
        "sync_running",
        f"source '{source}' of tenant '{tenant}' is already syncing{job}; "
        "its result shows in GET /v1/sources when it ends",
    )


@dataclass
class _Run:
    """A sync this process runs: its record, and the source's part of the sync report."""

    run: SyncRun
    started_ns: int
    synced: list[SourceSync] = field(default_factory=list)
    follower: asyncio.Task[None] | None = None


class SyncScheduler:
    """The scheduled and requested syncs of one app, one per source and tenant anywhere."""

    def __init__(
        self,
        kb: KnowledgeBase,
        jobs: JobRegistry,
        syncs: SyncState,
        *,
        check_seconds: float = 5.0,
        lease_seconds: float = LEASE_SECONDS,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.kb = kb
        self.jobs = jobs
        self.syncs = syncs
        self.check_seconds = check_seconds
        self.lease_seconds = lease_seconds
        self.clock = clock
        # who holds a lease, for people reading the table: host, process, this app
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._runs: dict[tuple[str, str], _Run] = {}
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False

    def scheduled(self) -> list[tuple[str, str, float]]:
        """(source, tenant, interval in seconds) of every scheduled sync in the config."""
        return [
            (name, tenant, source.schedule)
            for name, source in self.kb.config.sources.items()
            if source.schedule is not None
            for tenant in dict.fromkeys(source.schedule_tenants)
        ]

    def start(self) -> None:
        """Start looking for due syncs (when any source has a schedule)."""
        self._stopping = False  # an app's lifespan may start again after a stop
        if self.scheduled():
            self._loop = asyncio.get_running_loop().create_task(self._check_forever())

    async def _check_forever(self) -> None:
        while True:
            try:
                await self.run_due()
            except Exception as exc:  # the state database is down: check again later
                log.warning("checking for scheduled syncs failed: %s", exc)
            await asyncio.sleep(self.check_seconds)

    async def run_due(self) -> None:
        """Start every scheduled sync that is due and not running here or elsewhere."""
        last: dict[str, dict[str, tuple[int, SyncRun]]] = {}
        for source, tenant, interval in self.scheduled():
            if self._stopping or (source, tenant) in self._runs:
                continue
            if tenant not in last:
                last[tenant] = await asyncio.to_thread(self.syncs.runs, tenant)
            previous = last[tenant].get(source)
            if previous is not None and previous[0] + int(interval * 1e9) > self.clock():
                continue
            try:
                await self._start(source, tenant, "schedule", interval=interval)
            except ApiError as exc:  # another replica runs it (409), or the queue is full
                if exc.status != 409:
                    log.warning("scheduled sync of '%s' (%s) waits: %s", source, tenant, exc)

    async def run(
        self, source: str, tenant: str, trigger: Trigger, owner: str | None = None
    ) -> TenantJob:
        """Take the source's lease and start its sync as a job; a 409 ``ApiError`` when
        a sync of it runs anywhere (the lease is held)."""
        job = await self._start(source, tenant, trigger, owner)
        assert job is not None  # only a scheduled run is skipped when not due
        return job

    async def _start(
        self,
        source: str,
        tenant: str,
        trigger: Trigger,
        owner: str | None = None,
        interval: float | None = None,
    ) -> TenantJob | None:
        """``run``; with ``interval`` (a scheduled run), None when, with the lease taken,
        the last run turns out to be recent (another replica ran it meanwhile)."""
        if self._stopping:
            raise ApiError(503, "shutting_down", "the server is shutting down; retry")
        now = self.clock()
        expires = now + int(self.lease_seconds * 1e9)
        taken = await asyncio.to_thread(self.syncs.take, source, tenant, self.holder, expires, now)
        if not taken:
            leases = await asyncio.to_thread(self.syncs.leases, tenant, now)
            raise sync_running(source, tenant, leases.get(source))
        try:
            if interval is not None:
                previous = (await asyncio.to_thread(self.syncs.runs, tenant)).get(source)
                if previous is not None and previous[0] + int(interval * 1e9) > now:
                    await asyncio.to_thread(self.syncs.release, source, tenant, self.holder)
                    return None
            running = _Run(
                SyncRun(source=source, tenant=tenant, trigger=trigger, started_at=iso(now)), now
            )
            item = write_item(f"sync source {source}", self._sync(source, running))
            job = await self.jobs.submit(
                tenant, "sync", [item], source=source, total=0, owner=owner
            )
            ended = self.jobs.ending(job.id)  # at once: the job may end before we look
            running.run.job_id = job.id
            self._runs[(source, tenant)] = running
        except BaseException:
            await asyncio.to_thread(self.syncs.release, source, tenant, self.holder)
            raise
        try:  # the run and its job, seen by every replica before the caller hears of it
            await asyncio.to_thread(self.syncs.record, running.run, now)
            await asyncio.to_thread(self.syncs.renew, source, tenant, self.holder, expires, job.id)
        except Exception as exc:  # the state database blinked: the run's end is recorded
            log.warning("recording the start of sync job %s failed: %s", job.id, exc)
        finally:  # the job runs: its follower records its end and releases the lease
            running.follower = asyncio.get_running_loop().create_task(self._follow(running, ended))
        log.info("sync of source '%s' (%s) started: job %s (%s)", source, tenant, job.id, trigger)
        return job

    def _sync(self, source: str, running: _Run) -> Write:
        """The job's one write: the source's sync for the tenant."""

        async def write(tenant: str, progress: Progress) -> IngestReport:
            report = await self.kb.async_sync(
                source=source, tenant=tenant, progress=lambda _, so_far: progress(so_far)
            )
            synced = report.sources[0]
            running.synced.append(synced)
            if synced.outcome == "failed":  # the job lists it as its one failed input
                raise FlexMatchError(synced.reason or "the sync failed")
            return synced.report or IngestReport()

        return write

    async def _follow(self, running: _Run, ended: Awaitable[TenantJob | None]) -> None:
        """Renew the lease while the job runs; record how it went and release the lease,
        in one transaction."""
        run = running.run
        job: TenantJob | None = None
        waiting = asyncio.ensure_future(ended)
        try:
            while True:
                done, _ = await asyncio.wait([waiting], timeout=self.lease_seconds / 3)
                if done:
                    job = waiting.result()
                    break
                expires = self.clock() + int(self.lease_seconds * 1e9)
                try:
                    held = await asyncio.to_thread(
                        self.syncs.renew, run.source, run.tenant, self.holder, expires
                    )
                except Exception as exc:  # the state database blinked: renew next time
                    log.warning("renewing the lease of sync job %s failed: %s", run.job_id, exc)
                    continue
                if not held:
                    log.warning("sync job %s lost its lease (this process stalled)", run.job_id)
        finally:
            if job is None and waiting.done() and not waiting.cancelled():
                job = waiting.result()
            self._finish(running, job)
            try:
                await asyncio.to_thread(self.syncs.record, run, running.started_ns, self.holder)
            except Exception as exc:  # the lease expires by itself
                log.error("recording sync job %s failed: %s", run.job_id, exc)
            self._runs.pop((run.source, run.tenant), None)

    def _finish(self, running: _Run, job: TenantJob | None) -> None:
        """The run's outcome, counts and cost, from the sync report and the job."""
        run = running.run
        run.finished_at = iso(self.clock())
        if job is not None:
            run.usage = job.usage.model_copy()
        synced = running.synced[0] if running.synced else None
        if synced is None:
            run.outcome = "interrupted" if self._stopping or job is None else "failed"
            run.reason = job.error if job is not None else "the server stopped"
            return
        run.outcome, run.reason = synced.outcome, synced.reason
        report = synced.report
        if report is not None:
            run.added, run.changed, run.unchanged = report.added, report.changed, report.unchanged
            run.removed, run.failed = len(report.removed), len(report.failed)

    def statuses(self, tenant: str) -> list[SourceStatus]:
        """Every source's schedule, last and next run and whether it syncs now (anywhere),
        for ``tenant`` (blocking: it reads the shared state)."""
        now = self.clock()
        leases = self.syncs.leases(tenant, now)
        runs = self.syncs.runs(tenant)
        statuses = []
        for name, source in self.kb.config.sources.items():
            lease = leases.get(name)
            started_ns, run = runs.get(name, (None, None))
            if run is not None and run.outcome == "running" and lease is None:
                run.outcome = "interrupted"  # its replica died; the lease expired
                run.reason = "the server running it stopped before it ended"
            scheduled = source.schedule is not None and tenant in source.schedule_tenants
            next_ns = None
            if scheduled and source.schedule is not None:
                next_ns = now if started_ns is None else started_ns + int(source.schedule * 1e9)
            statuses.append(
                SourceStatus(
                    name=name,
                    type=source.type,
                    description=source.description,
                    schedule_seconds=source.schedule,
                    scheduled=scheduled,
                    running=lease is not None,
                    running_job=lease.job_id or None if lease is not None else None,
                    last_run=run,
                    next_run=None if next_ns is None else iso(next_ns),
                )
            )
        return statuses

    async def stop(self) -> None:
        """Take no new run (on shutdown, before the running jobs are cancelled)."""
        self._stopping = True
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)

    async def close(self) -> None:
        """Wait for the runs to be recorded and their leases released (their jobs ended)."""
        followers = [r.follower for r in self._runs.values() if r.follower is not None]
        await asyncio.gather(*followers, return_exceptions=True)
