"""One ingest run over a batch: repair first, documents indexed concurrently as they are
read, progress reported, LLM usage accounted.

Reading (parsing, fetching) happens in a worker thread, so the event loop stays free
for the LLM calls of the documents already read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable

from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.llm import LLM
from flexmatch.models import Document, FailedDocument, IngestReport, Usage

ProgressCallback = Callable[[IngestReport], None]
IndexOne = Callable[[Document], Awaitable[None]]


class ActiveRuns:
    """Ingest runs in progress per tenant, so a run never repairs another's pending work."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def busy(self, tenant: str) -> bool:
        return self._counts.get(tenant, 0) > 0

    def enter(self, tenant: str) -> None:
        self._counts[tenant] = self._counts.get(tenant, 0) + 1

    def leave(self, tenant: str) -> None:
        self._counts[tenant] -= 1


class IngestRun:
    """Index what a source read, in one tenant, reporting as it goes.

    ``index`` indexes one document (``ingest.Indexer``), recording its outcome in
    ``report``; the run decides what runs when, and accounts for it.
    """

    def __init__(
        self,
        *,
        report: IngestReport,
        index: IndexOne,
        registry: DocumentRegistry,
        llm: LLM | None,
        concurrency: int,
        tenant: str,
        active: ActiveRuns,
        index_min_points: int = 20_000,
    ) -> None:
        self.report = report
        self.index = index
        self.registry = registry
        self.llm = llm
        self.concurrency = concurrency
        self.tenant = tenant
        self.active = active
        self.index_min_points = index_min_points

    async def run(
        self,
        items: Iterable[Document | FailedDocument],
        *,
        progress: ProgressCallback | None = None,
    ) -> IngestReport:
        report = self.report
        started = time.perf_counter()
        usage_before = self._usage()
        self._tell(progress)  # the plan's size, before the first document is done
        if not self.active.busy(self.tenant):  # another run's pending documents are not stale
            report.repaired = self.registry.repair(self.tenant)
        self.active.enter(self.tenant)
        try:
            await self._index_all(items, progress, usage_before)
        finally:
            self.active.leave(self.tenant)
        report.usage = self._usage_since(usage_before)
        if report.added or report.changed:
            indexing = time.perf_counter()
            store = self.registry.store
            if await asyncio.to_thread(store.optimize, self.index_min_points):
                report.index_seconds = round(time.perf_counter() - indexing, 3)
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    async def _index_all(
        self,
        items: Iterable[Document | FailedDocument],
        progress: ProgressCallback | None,
        usage_before: Usage,
    ) -> None:
        report = self.report

        async def index(document: Document) -> None:
            await self.index(document)
            report.usage = self._usage_since(usage_before)
            self._tell(progress)

        pending: set[asyncio.Task[None]] = set()
        iterator = iter(items)
        while True:
            item = await asyncio.to_thread(next, iterator, None)
            if item is None:
                break
            if isinstance(item, FailedDocument):
                report.record_failed(item)
                self._tell(progress)
                continue
            pending.add(asyncio.create_task(index(item)))
            if len(pending) >= 2 * self.concurrency:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # Indexer.index reports per document; anything else is a bug
        if pending:
            await asyncio.gather(*pending)

    def _tell(self, progress: ProgressCallback | None) -> None:
        if progress is not None:
            progress(self.report)

    def _usage(self) -> Usage:
        return self.llm.usage.model_copy() if self.llm else Usage()

    def _usage_since(self, before: Usage) -> Usage:
        return self._usage() - before
