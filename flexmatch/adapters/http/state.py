"""What one server process shares between requests: the open knowledge base and its helpers.

The embedded store admits one process per knowledge base, so the server opens it once
and every request uses the same ``KnowledgeBase`` on the server's event loop. What
replicas must agree on (API keys, job records, cache generations) is in ``SharedState``,
read on every use; the search answers, rate-limit buckets and console sessions stay in
the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from fastapi import Request

from flexmatch import FlexMatchError, KnowledgeBase
from flexmatch.adapters.http.cache import SearchCache
from flexmatch.adapters.http.jobs import JobRegistry
from flexmatch.adapters.http.limits import Limits, RateLimiter
from flexmatch.adapters.http.metrics import Metrics
from flexmatch.adapters.http.scheduler import SyncScheduler
from flexmatch.adapters.http.throttle import Throttle
from flexmatch.adapters.http.writes import TenantWriter
from flexmatch.service import KeyStore, SharedState

log = logging.getLogger("flexmatch.adapters.http")
KEY_CHECK_THREADS = 4


@dataclass
class Readiness:
    """Whether the embedding model is loaded and the store opened (``/health/ready``)."""

    models_loaded: bool = False
    store_open: bool = False
    model_error: str | None = None
    store_error: str | None = None

    @property
    def error(self) -> str | None:
        return self.store_error or self.model_error


@dataclass
class ServiceState:
    kb: KnowledgeBase
    shared: SharedState
    keys: KeyStore
    limits: Limits
    cache: SearchCache
    limiter: RateLimiter
    writer: TenantWriter
    jobs: JobRegistry
    metrics: Metrics
    scheduler: SyncScheduler
    readiness: Readiness = field(default_factory=Readiness)
    throttle: Throttle = field(default_factory=Throttle)  # failed key checks
    # API key checks read the key store here, off the event loop, on threads of their own
    # (a slow or locked store then holds the checks, not the loop or other threads' work)
    key_checks: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(KEY_CHECK_THREADS, "flexmatch-keys")
    )
    _warm: asyncio.Task[None] | None = None
    _unlisten: Callable[[], None] | None = None

    @classmethod
    def build(cls, kb: KnowledgeBase, shared: SharedState, limits: Limits) -> ServiceState:
        cache = SearchCache(
            limits.cache_entries, limits.cache_ttl_seconds, generations=shared.generations
        )
        writer = TenantWriter()
        if kb.config.service.state_url:  # replicas share one query log, as they share state
            kb.query_log.share(shared.database)
        warm: list[ServiceState] = []  # the jobs wait for the state's warm-up
        # the metrics read the jobs running when scraped; the jobs count into the metrics
        metrics = Metrics.for_service(kb, lambda: warm[0].jobs.counts() if warm else {})

        async def ready() -> None:
            await warm[0].warmed()

        jobs = JobRegistry(
            kb,
            writer,
            ready,
            shared,
            keep=limits.jobs_kept,
            readers=kb.config.ingest.fetch_workers,
            max_jobs=kb.config.service.queue.max_jobs_per_tenant,
            max_bytes=kb.config.service.queue.max_bytes_per_tenant,
            retry_after=kb.config.service.queue.retry_after_seconds,
            metrics=metrics,
        )
        state = cls(
            kb=kb,
            shared=shared,
            keys=shared.keys,
            limits=limits,
            cache=cache,
            limiter=RateLimiter(limits.rate_per_second, limits.burst),
            throttle=Throttle(
                kb.config.service.throttle, known_ids=lambda: [k.id for k in shared.keys.list()]
            ),
            writer=writer,
            jobs=jobs,
            metrics=metrics,
            scheduler=SyncScheduler(
                kb, jobs, shared.syncs, check_seconds=limits.sync_check_seconds
            ),
        )
        warm.append(state)
        return state

    def start(self) -> None:
        """Load the embedding model and open the store in the background; hear every
        write to the knowledge base; start the scheduled syncs."""
        self._warm = asyncio.get_running_loop().create_task(self._warm_up())
        if self._unlisten is None:  # any write, whatever path made it, drops its tenant's answers
            self._unlisten = self.kb.on_write(self.cache.invalidate)
        self.scheduler.start()

    async def _warm_up(self) -> None:
        await asyncio.to_thread(self.probe_store)  # may wait for another process's lock
        try:
            await asyncio.to_thread(self.kb.warm_up)
            self.readiness.models_loaded = True
        except Exception as exc:
            log.error("loading the embedding model failed", exc_info=exc)
            self.readiness.model_error = str(exc)

    def probe_store(self) -> bool:
        """Open the store (when there is one yet); True if it answers."""
        try:
            self.kb.check_store()
        except FlexMatchError as exc:
            self.readiness.store_open, self.readiness.store_error = False, str(exc)
            return False
        self.readiness.store_open, self.readiness.store_error = True, None
        return True

    async def store_bytes_for(self, tenant: str, admin: bool, size: int | None) -> int | None:
        """The store's size on disk as a key of ``tenant`` may see it (``/v1/stats`` and
        the console, one rule): to an admin of a service whose active keys are all its own
        tenant's. The size counts every tenant's documents, so where another tenant has
        keys it would tell one tenant how much another writes (the operator's ``/metrics``
        has it)."""
        if not admin or size is None:
            return None
        keys = await asyncio.to_thread(self.keys.list)
        return size if {key.tenant for key in keys if not key.revoked} <= {tenant} else None

    async def warmed(self) -> None:
        """Wait for the warm-up, so a first request does not load the model a second time."""
        if self._warm is not None and not self._warm.done():
            await asyncio.shield(self._warm)

    async def close(self) -> None:
        if self._warm is not None and not self._warm.done():
            self._warm.cancel()
        await self.scheduler.stop()  # no new sync
        await self.jobs.close()  # key_checks stays usable: a lifespan may start again
        await self.scheduler.close()  # the syncs recorded interrupted, their leases released
        if self._unlisten is not None:  # deaf from now: nothing kept may be served later
            self._unlisten()
            self._unlisten = None
        self.cache.clear()


def get_state(request: Request) -> ServiceState:
    return request.app.state.service
