"""Load, the ingest path's first stage: a source's inputs planned and read into one
stream of documents.

Web pages named one by one are fetched first (concurrently, each bounded by its
deadline), a crawl's pages spooled to a file, then everything else is read as the run
takes it: no store is held (locked) while web servers answer.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from flexmatch.config import CONFIG_FILE
from flexmatch.engine.chains.sources import SourceChains
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.ingest.resources import Resources
from flexmatch.errors import ConfigError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.sources import Plan, SourceReader, spooled
from flexmatch.inputs.sources.items import Item
from flexmatch.inputs.sources.types import StoredCopies, state_file
from flexmatch.models import DocumentRecord, IngestReport


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

    def __init__(self, resources: Resources, chains: Callable[[str], SourceChains]) -> None:
        self.resources = resources
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
        config = self.resources.config
        name = source or config.default_source
        self.chains(name)  # validates the name and the chains up front
        parse, fetch = pools or (self.resources.parse_workers, self.resources.fetch_workers)
        return SourceReader(
            name,
            config.sources[name],
            self.resources.path,
            config.ingest,
            parse,
            fetch,
            stored=None if tenant is None else self._stored(name, tenant),
            where=str(self.resources.path / CONFIG_FILE),
        )

    def _stored(self, source: str, tenant: str) -> StoredCopies:
        """What ``tenant`` holds of ``source``: committed metadata (validators, version
        hints) and stored copies by document id, and the source's state file. The
        metadata is read now, at once, and a store opened for it closed again."""
        with self.resources.store_for_now() as store:
            records = DocumentRegistry(store).list(tenant, source) if store.exists() else []
        committed = {r.id: r.metadata for r in records if r.status == "complete"}
        archive = self.resources.archive
        return StoredCopies(
            metadata=committed.get,
            document=lambda document_id: archive.get(tenant, document_id),
            state_file=state_file(self.resources.state_dir / "sources", tenant, source),
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
        slots = asyncio.Semaphore(self.resources.config.ingest.fetch_workers)

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


def within(uri: str, root: Path) -> bool:
    """Whether a document's ``uri`` is a file under ``root`` (or ``root`` itself), or an
    entry of one (``file:3``, ``file#key``, ``file[2]``), as listed or resolved."""
    for place in dict.fromkeys((str(root), str(root.resolve()))):
        if uri == place or (uri.startswith(place) and uri[len(place)] in f"{os.sep}:#["):
            return True
    return False


def prunable_records(
    reader: SourceReader, resources: Resources, tenant: str
) -> tuple[list[DocumentRecord], str | None]:
    """The source's documents a run did not reach, or found gone, or why none may be
    removed after it (it did not see the whole source). Only documents from where the
    run looks are candidates (a file ingested from elsewhere is kept), and a configured
    path that listed no file while documents are stored under it (an emptied folder, an
    unmounted share) stops the prune."""
    log = reader.log
    scope = reader.scope
    records = [
        record
        for record in DocumentRegistry(resources.store).list(tenant, reader.name, None)
        if scope is None or any(within(record.uri, root) for root in scope)
    ]
    incomplete = list(log.incomplete)
    for path in log.empty:
        stored = sum(within(record.uri, path) for record in records)
        if stored:
            incomplete.append(f"{path}: no file listed, {stored} documents stored under it")
    if incomplete or log.documents == 0:
        reasons = list(dict.fromkeys(incomplete))  # the first three, and a count
        more = f"; and {len(reasons) - 3} more" if len(reasons) > 3 else ""
        why = "; ".join(reasons[:3]) + more or "nothing could be read"
        return [], f"not pruned: {why}"
    keep = log.reached - log.gone
    return [record for record in records if record.id not in keep], None


def prune(reader: SourceReader, report: IngestReport, resources: Resources, tenant: str) -> None:
    """Remove the source's documents this run did not reach, or found gone; never after a
    run that did not see the whole source (``prunable_records``)."""
    records, refused = prunable_records(reader, resources, tenant)
    if refused is not None:
        report.warnings.append(refused)
    registry = DocumentRegistry(resources.store)
    for record in records:
        if registry.remove(tenant, record.id):
            resources.archive.remove(tenant, record.id)
            report.removed.append(record.uri)
