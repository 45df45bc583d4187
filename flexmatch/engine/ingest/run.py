"""The run: what a source read, indexed in one tenant, reporting as it goes.

Repair first, then documents chunked, enriched and embedded (``embed``) and committed
(``commit``) concurrently as they are read, progress reported, LLM usage accounted.
Reading (parsing, fetching) happens on a thread of its own, ahead of the indexing, so
the event loop stays free for the LLM calls of the documents already read. ``work=``
replaces this process's chunk → enrich → embed (Ray workers: ``fanout``).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import aclosing
from typing import Any, TypeVar

from flexmatch.access import Principal
from flexmatch.engine.chains.sources import SourceChains
from flexmatch.engine.documents import ActiveRuns, DocumentRegistry
from flexmatch.engine.embedders import EmbeddingBatcher
from flexmatch.engine.ingest.commit import Indexer
from flexmatch.engine.ingest.embed import LocalWork, Work
from flexmatch.engine.ingest.resources import Resources
from flexmatch.engine.llm import LLM
from flexmatch.models import Document, FailedDocument, IngestReport, Usage

ProgressCallback = Callable[[IngestReport], None]

IndexOne = Callable[[Document], Awaitable[None]]

T = TypeVar("T")

READ_AHEAD = 32  # documents read before the run takes them (8 slowed the first 32 by 60 ms)


async def read_ahead(items: Iterable[T], size: int) -> AsyncGenerator[T, None]:
    """``items`` (a blocking iterator: parsing, fetching) read on a thread of its own, at
    most ``size`` ahead of the loop. Each item reaches the loop as soon as it is read: a
    thread hop per item cost ~5 ms under load, so a run's first 32 documents took ~0.2 s
    to start. The iterator's error is raised here; leaving early stops the thread at
    its next item."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    room = threading.Semaphore(size)
    stopped = threading.Event()

    def hand_over(kind: str, value: Any) -> bool:
        while not room.acquire(timeout=0.1):
            if stopped.is_set() or loop.is_closed():
                return False
        if stopped.is_set():
            return False
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
        except RuntimeError:  # the loop is closed
            return False
        return True

    def read() -> None:
        try:
            for item in items:
                if not hand_over("item", item):
                    return
        except BaseException as exc:
            hand_over("error", exc)
        else:
            hand_over("end", None)

    context = contextvars.copy_context()  # as asyncio.to_thread would give it
    threading.Thread(target=context.run, args=(read,), name="flexmatch-reader", daemon=True).start()
    try:
        while True:
            kind, value = await queue.get()
            room.release()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stopped.set()


class IngestRun:
    """Index what a source read, in one tenant, reporting as it goes.

    ``index`` indexes one document (``commit.Indexer``), recording its outcome in
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
        text_in_flight: int = 1_000_000,
    ) -> None:
        self.report = report
        self.index = index
        self.registry = registry
        self.llm = llm
        self.concurrency = concurrency
        self.tenant = tenant
        self.active = active
        self.index_min_points = index_min_points
        self.text_in_flight = text_in_flight  # characters (``ingest.text_in_flight``)

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
        # another run's pending documents are not stale: the first run alone repairs
        report.repaired = self.active.enter(self.tenant, lambda: self.registry.repair(self.tenant))
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

        pending: dict[asyncio.Task[None], int] = {}  # each task's text, in characters
        held = 0

        async def settle() -> int:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # Indexer.index reports per document; else a bug
            return sum(pending.pop(task) for task in done)

        # READ_AHEAD documents wait beside the pending tasks: at most 2 x concurrency of
        # them, and at most ``text_in_flight`` characters of text between them (a larger
        # document alone): memory follows the documents in flight, not the run (with 64
        # documents in flight, a folder of large files took over 4 GB)
        async with aclosing(read_ahead(items, READ_AHEAD)) as read:
            async for item in read:
                if isinstance(item, FailedDocument):
                    report.record_failed(item)
                    self._tell(progress)
                    continue
                size = sum(len(element.text) for element in item.elements)  # not joined
                while pending and (
                    len(pending) >= 2 * self.concurrency or held + size > self.text_in_flight
                ):
                    held -= await settle()
                pending[asyncio.create_task(index(item))] = size
                held += size
        if pending:
            await asyncio.gather(*pending)

    def _tell(self, progress: ProgressCallback | None) -> None:
        if progress is not None:
            progress(self.report)

    def _usage(self) -> Usage:
        return self.llm.usage.model_copy() if self.llm else Usage()

    def _usage_since(self, before: Usage) -> Usage:
        return self._usage() - before


async def run_ingest(
    items: Iterable[Document | FailedDocument],
    runtime: Resources,
    chains: Callable[[str], SourceChains],
    tenant: str,
    *,
    progress: ProgressCallback | None = None,
    planned: int = 0,
    work: Work | None = None,
    concurrency: int | None = None,
    writer: Principal | None = None,
) -> IngestReport:
    """Index ``items`` in ``tenant`` (``chains``: a source's ingest chains); ``work`` (chunk,
    enrich and embed) runs here unless another is given (Ray workers), with
    ``concurrency`` documents in flight (else ``ingest.document_concurrency``).
    ``writer``: who writes; a stored document it may not read is not replaced
    (``commit.check_writable``; None: an admin, who may)."""
    config = runtime.config
    report = IngestReport(planned=planned)
    store, embedder = runtime.store, runtime.embedder
    concurrency = concurrency or config.ingest.document_concurrency
    if work is None:
        batcher = EmbeddingBatcher(embedder, config.models.embedding_batch_size)
        work = LocalWork(store, tenant, embedder, config.ingest, report, batcher)
    indexer = Indexer(
        store,
        tenant,
        config.ingest,
        report,
        work,
        archive=runtime.archive,
        concurrency=concurrency,
        writer=writer,
    )
    run = IngestRun(
        report=report,
        index=lambda document: indexer.index(document, chains(document.source)),
        registry=DocumentRegistry(store),
        llm=runtime.llm,
        concurrency=concurrency,
        tenant=tenant,
        active=runtime.active_runs,
        index_min_points=config.store.index_min_points,
        text_in_flight=config.ingest.text_in_flight,
    )
    # off the event loop: creating a store takes ~0.2 s
    await asyncio.to_thread(store.prepare, embedder.name, embedder.dimension)
    return await run.run(items, progress=progress)
