"""Load, the ingest path's first stage: a source's inputs planned and read into one
stream of documents.

Web pages named one by one are fetched first (concurrently, each bounded by its
deadline), a crawl's pages spooled to a file, then everything else is read as the run
takes it: no store is held (locked) while web servers answer.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from flexmatch.config import CONFIG_FILE
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.ingest import SourceChains
from flexmatch.engine.runtime import Runtime
from flexmatch.errors import ConfigError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.loaders import Item
from flexmatch.inputs.sources import Plan, SourceReader, spooled
from flexmatch.inputs.sources.types import StoredCopies, state_file
from flexmatch.models import IngestReport


@dataclass
class Loaded:
    """What a source's inputs are: the plan, its size, and the documents as one stream."""

    reader: SourceReader
    plan: Plan
    total: int
    items: Iterator[Item]

    def finish(self, report: IngestReport) -> IngestReport:
        """The run's report with what reading learnt: pages not modified, limits applied
        and, for a crawl (whose plan was its page limit), how many it really found."""
        report.not_modified = self.reader.log.not_modified
        report.warnings.extend(self.reader.log.warnings)
        if self.plan.stream is not None:
            report.planned = report.processed
        return report


class Loader:
    """The reading side of one knowledge base's ingests (``chains``: a source's ingest
    chains, which validate its name and chains before anything is read)."""

    def __init__(self, runtime: Runtime, chains: Callable[[str], SourceChains]) -> None:
        self.runtime = runtime
        self.chains = chains

    def reader(
        self,
        source: str | None,
        tenant: str | None = None,
        pools: tuple[IsolatedPool, IsolatedPool] | None = None,
    ) -> SourceReader:
        """The source's reader; with ``tenant``, it sees what that tenant holds of the
        source (so unchanged pages and files are not fetched or parsed again); ``pools``:
        the (parse, fetch) workers, else this process's."""
        config = self.runtime.config
        name = source or config.default_source
        self.chains(name)  # validates the name and the chains up front
        parse, fetch = pools or (self.runtime.parse_workers, self.runtime.fetch_workers)
        return SourceReader(
            name,
            config.sources[name],
            self.runtime.path,
            config.ingest,
            parse,
            fetch,
            stored=None if tenant is None else self._stored(name, tenant),
            where=str(self.runtime.path / CONFIG_FILE),
        )

    def _stored(self, source: str, tenant: str) -> StoredCopies:
        """What ``tenant`` holds of ``source``: committed metadata (validators, version
        hints) and stored copies by document id, and the source's state file. The
        metadata is read now, at once, and a store opened for it closed again."""
        with self.runtime.store_for_now() as store:
            records = DocumentRegistry(store).list(tenant, source) if store.exists() else []
        committed = {r.id: r.metadata for r in records if r.status == "complete"}
        archive = self.runtime.archive
        return StoredCopies(
            metadata=committed.get,
            document=lambda document_id: archive.get(tenant, document_id),
            state_file=state_file(self.runtime.state_dir / "sources", tenant, source),
        )

    async def load(self, reader: SourceReader, inputs: Iterable[str | Path]) -> Loaded:
        """``inputs`` planned and read: pages fetched now, a crawl spooled, the rest read
        as the stream is taken."""
        plan = await asyncio.to_thread(reader.plan, inputs)
        total = await asyncio.to_thread(lambda: plan.total)
        pages = await self.fetch(reader, plan.urls)
        crawled = await asyncio.to_thread(spooled, reader.read_stream(plan))
        items = itertools.chain(pages, crawled, reader.read(plan, urls=False, stream=False))
        return Loaded(reader=reader, plan=plan, total=total, items=items)

    async def fetch(self, reader: SourceReader, urls: list[str]) -> list[Item]:
        """Web pages, fetched concurrently (each one bounded by its deadline)."""
        slots = asyncio.Semaphore(self.runtime.config.ingest.fetch_workers)

        async def one(url: str) -> Item:
            async with slots:
                return await asyncio.to_thread(reader.read_url, url)

        return list(await asyncio.gather(*(one(url) for url in urls)))


def check_prunable(reader: SourceReader, inputs: list[str | Path]) -> None:
    """Refuse ``prune`` where a run cannot see the whole source."""
    if inputs:
        raise ConfigError("prune follows a whole-source run only: name no inputs with it")
    if not reader.prunable:
        raise ConfigError(
            f"source '{reader.name}' (type '{reader.config.type}') cannot be pruned: its "
            f"runs do not list the whole source; set sources.{reader.name}.paths (files "
            "and records) or urls (web) in flexmatch.yaml"
        )


def prune(reader: SourceReader, report: IngestReport, runtime: Runtime, tenant: str) -> None:
    """Remove the source's documents this run did not reach, or found gone; never after a
    run that did not see the whole source."""
    log = reader.log
    if log.incomplete or log.documents == 0:
        reasons = list(dict.fromkeys(log.incomplete))  # the first three, and a count
        more = f"; and {len(reasons) - 3} more" if len(reasons) > 3 else ""
        why = "; ".join(reasons[:3]) + more or "nothing could be read"
        report.warnings.append(f"not pruned: {why}")
        return
    keep = log.reached - log.gone
    registry = DocumentRegistry(runtime.store)
    for record in registry.list(tenant, reader.name, None):
        if record.id not in keep and registry.remove(tenant, record.id):
            runtime.archive.remove(tenant, record.id)
            report.removed.append(record.uri)
