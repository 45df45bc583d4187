"""One knowledge base's ingests, start to end: a source's reader, load → run (here or on
Ray workers, ``fanout``), prune, and the runs that read no source (documents already
read, records, uploads, re-indexes from stored copies); ``estimate`` says what one would
cost. The facade hands each ingest call here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from flexmatch.access import Principal
from flexmatch.engine.chains import SourceChains
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.embedders.remote import LiteLLMEmbedder
from flexmatch.engine.ingest.embed import Work
from flexmatch.engine.ingest.estimate import estimate_reading, plan_reindex
from flexmatch.engine.ingest.fanout import RayFanOut, RayOptions
from flexmatch.engine.ingest.load import Loader, check_prunable, prunable_records, prune
from flexmatch.engine.ingest.resources import Resources
from flexmatch.engine.ingest.run import ProgressCallback, run_ingest
from flexmatch.engine.writes import Writes
from flexmatch.errors import ConfigError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.sources import SourceReader
from flexmatch.inputs.sources.items import Item
from flexmatch.models import CostEstimate, FailedDocument, IngestReport, ReindexPlan


class Ingestor:
    """The ingests of one open knowledge base (``source_chains``: a source's ingest chains;
    ``writes`` hears the tenant after each run and each prune, whatever they changed)."""

    def __init__(
        self,
        resources: Resources,
        source_chains: Callable[[str], SourceChains],
        writes: Writes | None = None,
    ) -> None:
        self.resources = resources
        self.source_chains = source_chains
        self.writes = writes or Writes()
        self.loader = Loader(resources, source_chains)

    def reader(
        self,
        source: str | None,
        tenant: str | None = None,
        pools: tuple[IsolatedPool, IsolatedPool] | None = None,
    ) -> SourceReader:
        """``Loader.reader``: the source's reader (checked, its chains built)."""
        return self.loader.reader(source, tenant, pools)

    async def ingest(
        self,
        inputs: list[str | Path],
        source: str | None,
        tenant: str,
        progress: ProgressCallback | None,
        *,
        prune_after: bool = False,
        ray: RayOptions | None = None,
        writer: Principal | None = None,
    ) -> IngestReport:
        """Load ``inputs`` (the whole source: none) and index them; with ``ray``, parsing,
        fetching and each document's work run on Ray workers, the checks and the writes
        here, so the result is that of a local run. ``writer``: see ``run``; a prune
        removes what it did not reach, so only an admin (no writer) may ask for one."""
        if prune_after and writer is not None:
            raise ConfigError(
                "prune removes the documents a run did not reach, readable or not: only an "
                "admin (no principal) may prune"
            )
        if ray is None:
            return await self._ingest(inputs, source, tenant, progress, prune_after, None, writer)
        resources = self.resources
        llm = resources.llm
        # the workers embed with the model this process chose (no second look at the store)
        models = resources.config.models.model_copy(update={"embedding": resources.embedder.name})
        async with RayFanOut.start(
            ray,
            kb_dir=resources.path,
            config=resources.config.model_copy(update={"models": models}),
            env=resources.context.env,
            llm_cache=resources.llm_cache_file if llm else None,
            usage=llm.usage if llm else None,
            embedding_model=models.embedding,
        ) as fanout:
            return await self._ingest(inputs, source, tenant, progress, prune_after, fanout, writer)

    async def _ingest(
        self,
        inputs: list[str | Path],
        source: str | None,
        tenant: str,
        progress: ProgressCallback | None,
        prune_after: bool,
        fanout: RayFanOut | None,
        writer: Principal | None = None,
    ) -> IngestReport:
        pools = (fanout.pool("parse"), fanout.pool("fetch")) if fanout else None
        reader = self.loader.reader(source, tenant, pools)
        if prune_after:
            check_prunable(reader, inputs)
        loaded = await self.loader.load(reader, inputs)
        work, concurrency = (fanout.work, fanout.concurrency) if fanout else (None, None)
        run = self.run(
            loaded.items,
            tenant,
            progress,
            loaded.total,
            work=work,
            concurrency=concurrency,
            writer=writer,
        )
        report = loaded.finish(await run)
        if prune_after:
            try:
                await asyncio.to_thread(prune, reader, report, self.resources, tenant)
            finally:
                await asyncio.to_thread(self.writes.written, tenant)
        return report

    async def run(
        self,
        items: Iterable[Item],
        tenant: str,
        progress: ProgressCallback | None = None,
        planned: int = 0,
        *,
        work: Work | None = None,
        concurrency: int | None = None,
        writer: Principal | None = None,
    ) -> IngestReport:
        """``items`` indexed in ``tenant`` (``run.run_ingest``) as ``writer`` (None: an
        admin): a stored document it may not read is never replaced. However it ends,
        ``writes`` hears of it (what it committed before a failure stays committed)."""
        try:
            return await run_ingest(
                items,
                self.resources,
                self.source_chains,
                tenant,
                progress=progress,
                planned=planned,
                work=work,
                concurrency=concurrency,
                writer=writer,
            )
        finally:  # off the event loop: a shared cache generation is a database write
            await asyncio.to_thread(self.writes.written, tenant)

    async def fetch_pages(self, urls: Iterable[str], source: str | None) -> list[Item]:
        """Web pages fetched and parsed under ``source``'s web rules, not yet stored."""
        return await self.loader.fetch(self.loader.reader(source), list(urls))

    async def read_upload(
        self,
        filename: str,
        data: bytes,
        source: str | None,
        document_id: str | None,
        metadata: dict[str, Any] | None,
    ) -> list[Item]:
        """The documents in a file given as bytes, read off the event loop (parsed in a
        worker process), not yet stored."""
        reader = self.loader.reader(source)
        return await asyncio.to_thread(reader.upload, filename, data, document_id, metadata)

    async def read_records(
        self, records: Iterable[Any], source: str | None, first: int
    ) -> list[Item]:
        """Records rendered through a records source's template, not yet stored; ``first``
        numbers them from that index."""
        reader = self.loader.reader(source)
        return await asyncio.to_thread(lambda: list(reader.records(records, first)))

    async def estimate(
        self, inputs: list[str | Path], source: str | None, prune: bool, tenant: str
    ) -> CostEstimate:
        """What ingesting ``inputs`` would cost (``estimate``), read as a real run reads
        them; with ``prune``, what it would remove, or why it would not."""
        reader = self.loader.reader(source, tenant if prune else None)
        if prune:
            check_prunable(reader, inputs)
        plan = await asyncio.to_thread(reader.plan, inputs)
        pages = await self.loader.fetch(reader, plan.urls)
        rest = reader.read(plan, urls=False)
        limit = self.resources.config.ingest.max_document_bytes
        llm = self.resources.llm
        embedder = self.resources.embedder
        local = None if isinstance(embedder, LiteLLMEmbedder) else embedder  # spend nothing
        estimate = await estimate_reading(pages, rest, self.source_chains, llm, limit, local)
        if prune:
            found = await asyncio.to_thread(prunable_records, reader, self.resources, tenant)
            gone, refused = found
            estimate.removed = [record.uri for record in gone]
            estimate.warnings += [refused] if refused else []
        return estimate

    async def reindex_plan(self, source: str | None, tenant: str) -> ReindexPlan:
        """The documents the current chains would index differently, and the cost."""
        if source is not None:
            self.source_chains(source)  # an unknown source is named
        archive = self.resources.archive
        return await plan_reindex(
            DocumentRegistry(self.resources.store).list(tenant, source, None),
            self.resources.config.sources,
            self.source_chains,
            lambda document_id: archive.get(tenant, document_id),
            self.resources.llm,
            ReindexPlan(tenant=tenant, source=source),
        )

    async def reindex(
        self, source: str | None, tenant: str, progress: ProgressCallback | None
    ) -> IngestReport:
        """The documents whose chains changed, indexed again from their stored copies."""
        plan = await self.reindex_plan(source, tenant)
        missing = set(plan.missing)
        archive = self.resources.archive
        items: list[Item] = [
            document
            for document_id in plan.stale
            if document_id not in missing
            and (document := archive.get(tenant, document_id)) is not None
        ]
        items += [
            FailedDocument(
                uri=document_id, error=f"{document_id}: no stored copy; ingest it from its source"
            )
            for document_id in plan.missing
        ]
        return await self.run(items, tenant, progress, len(items))
