"""``KnowledgeBase``: the public Python API, async first with sync wrappers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

from flexmatch import resources
from flexmatch.chains.base import ChainContext, build_chain
from flexmatch.chains.formatters import ResultFormatter
from flexmatch.config import CONFIG_FILE, KBConfig, QueryConfig, load_config
from flexmatch.documents import DocumentRegistry
from flexmatch.embeddings import Embedder, make_embedder
from flexmatch.errors import ConfigError, DocumentNotFoundError
from flexmatch.llm import LLM
from flexmatch.llm_cache import LLMCache
from flexmatch.loaders import LoadTask
from flexmatch.models import (
    Document,
    DocumentDetail,
    DocumentRecord,
    FailedDocument,
    IngestReport,
    SearchResult,
    Stats,
    Usage,
)
from flexmatch.pipeline import (
    Indexer,
    ProgressCallback,
    QueryChains,
    SourceChains,
    search,
    similar,
)
from flexmatch.sources import SourceReader
from flexmatch.stores import Filters, VectorStore, open_store

DEFAULT_TENANT = "default"
T = TypeVar("T")
STATE_DIR = ".flexmatch"


class KnowledgeBase:
    """A folder with a ``flexmatch.yaml``, its chains and prompts, and a Qdrant store."""

    def __init__(
        self,
        path: Path,
        config: KBConfig,
        *,
        env: dict[str, str] | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.path = path
        self.config = config
        self.context = ChainContext(kb_dir=path, llm=self._make_llm(), env=env)
        self.embedder = embedder or make_embedder(config.models)
        self._store: VectorStore | None = None
        self._source_chains: dict[str, SourceChains] = {}
        self._query_chains: QueryChains | None = None
        self._formatter: ResultFormatter | None = None
        self._active_runs: dict[str, int] = {}  # ingest runs in progress, per tenant
        self._store_lock = threading.Lock()

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | Path = ".",
        *,
        config: KBConfig | None = None,
        env: dict[str, str] | None = None,
        embedder: Embedder | None = None,
    ) -> KnowledgeBase:
        """Open the knowledge base in ``path`` (its ``flexmatch.yaml``, or all defaults)."""
        folder = Path(path).expanduser().resolve()
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{folder}: a knowledge base is a folder, not a file")
        return cls(folder, config or load_config(folder, env), env=env, embedder=embedder)

    @staticmethod
    def init(path: str | Path, template: str = "default") -> Path:
        """Create a knowledge-base folder from a built-in config template."""
        folder = Path(path).expanduser().resolve()
        target = folder / CONFIG_FILE
        if target.exists():
            raise ConfigError(f"{target} already exists; not overwriting it")
        source = resources.find("configs", template, None, suffixes=("", ".yaml", ".yml"))
        template_text = source.read_text(encoding="utf-8")
        folder.mkdir(parents=True, exist_ok=True)
        for sub in ("chains", "prompts"):
            (folder / sub).mkdir(exist_ok=True)
        target.write_text(template_text, encoding="utf-8")
        load_config(folder)  # a template that does not validate is a bug: say so now
        return target

    def _make_llm(self) -> LLM | None:
        models = self.config.models
        if not models.llm:
            return None
        return LLM(
            models.llm,
            api_base=models.llm_api_base,
            api_key=models.llm_api_key,
            concurrency=models.llm_concurrency,
            timeout=models.llm_timeout,
            max_retries=models.llm_max_retries,
            retry_base_delay=models.llm_retry_delay,
            cache=LLMCache(self.path / STATE_DIR / "llm-cache.sqlite"),
        )

    @property
    def llm(self) -> LLM | None:
        return self.context.llm

    @property
    def notices(self) -> list[str]:
        """Things the user should know once, e.g. which chains fell back for lack of an LLM."""
        return list(dict.fromkeys(self.context.notices))

    @property
    def store(self) -> VectorStore:
        with self._store_lock:  # two threads must not open the embedded store twice
            if self._store is None:
                self._store = open_store(self.config.store, self.path)
            return self._store

    def source_chains(self, source: str) -> SourceChains:
        if source not in self.config.sources:
            known = ", ".join(sorted(self.config.sources))
            raise ConfigError(
                f"{self.path / CONFIG_FILE}: no source named '{source}' (sources: {known})"
            )
        if source not in self._source_chains:
            self._source_chains[source] = SourceChains.build(
                self.config.sources[source], self.context
            )
        return self._source_chains[source]

    def query_chains(self) -> QueryChains:
        if self._query_chains is None:
            self._query_chains = QueryChains.build(self.config.query, self.context)
        return self._query_chains

    def use_query_config(self, query: QueryConfig) -> None:
        """Switch the query settings (and chains) of an open knowledge base, e.g. to compare
        setups on one ingested corpus."""
        self.config = self.config.model_copy(update={"query": query})
        self._query_chains = None
        self._formatter = None

    def formatter(self, name: str | None = None) -> ResultFormatter:
        if name is not None:
            from flexmatch.config import ChainRef

            return build_chain(ChainRef(chain=name), "result_formatter", self.context)  # type: ignore[return-value]
        if self._formatter is None:
            self._formatter = build_chain(  # type: ignore[assignment]
                self.config.query.formatter, "result_formatter", self.context
            )
        assert self._formatter is not None
        return self._formatter

    # -- ingest ------------------------------------------------------------------------
    def reader(self, source: str | None = None) -> SourceReader:
        name = source or self.config.default_source
        self.source_chains(name)  # validates the name and the chains up front
        return SourceReader(name, self.config.sources[name], self.path, self.config.ingest)

    async def aingest(
        self,
        inputs: Iterable[str | Path] = (),
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        progress: ProgressCallback | None = None,
    ) -> IngestReport:
        """Load, chunk, enrich, embed and store every document in ``inputs`` (files,
        folders, JSON Lines corpora, http(s) URLs; records files for a records source)."""
        reader = self.reader(source)
        urls, tasks, failed = reader.plan(inputs)
        return await self.aingest_planned(
            reader, urls, tasks, failed, tenant=tenant, progress=progress
        )

    async def aingest_planned(
        self,
        reader: SourceReader,
        urls: list[str],
        tasks: list[LoadTask],
        failed: list[FailedDocument],
        *,
        tenant: str = DEFAULT_TENANT,
        progress: ProgressCallback | None = None,
    ) -> IngestReport:
        """Ingest what ``reader.plan`` found (the CLI plans first to size its progress bar)."""
        return await self._run(reader.read(urls, tasks, failed), tenant, progress)

    async def aadd_records(
        self,
        records: Iterable[Any],
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> IngestReport:
        """Ingest structured records (JSON-like objects) through a records source's template."""
        return await self._run(self.reader(source).records(records), tenant, None)

    async def aingest_urls(
        self,
        urls: Iterable[str],
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        progress: ProgressCallback | None = None,
    ) -> IngestReport:
        """Import web pages only: anything that is not an http(s) URL is refused, never
        read as a local path (what services exposed to callers must use)."""
        reader = self.reader(source)
        return await self._run(reader.read_urls(list(urls)), tenant, progress)

    async def aingest_upload(
        self,
        filename: str,
        data: bytes,
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        document_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> IngestReport:
        """Ingest one file given as bytes; with ``document_id`` it replaces that document."""
        item = self.reader(source).upload(filename, data, document_id, metadata)
        return await self._run([item], tenant, None)

    async def _run(
        self,
        items: Iterable[Document | FailedDocument],
        tenant: str,
        progress: ProgressCallback | None,
    ) -> IngestReport:
        report = IngestReport()
        started = time.perf_counter()
        usage_before = self._usage_snapshot()
        self.store.prepare(self.embedder.name, self.embedder.dimension)
        indexer = Indexer(self.store, self.embedder, tenant, self.config.ingest, report)
        if not self._active_runs.get(tenant):  # another run's pending documents are not stale
            report.repaired = indexer.registry.repair(tenant)
        self._active_runs[tenant] = self._active_runs.get(tenant, 0) + 1
        try:
            await self._index_all(items, indexer, report, progress, usage_before)
        finally:
            self._active_runs[tenant] -= 1
        report.usage = self._usage_since(usage_before)
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    async def _index_all(
        self,
        items: Iterable[Document | FailedDocument],
        indexer: Indexer,
        report: IngestReport,
        progress: ProgressCallback | None,
        usage_before: Usage,
    ) -> None:

        async def index(document: Document) -> None:
            await indexer.index(document, self.source_chains(document.source))
            report.usage = self._usage_since(usage_before)
            if progress is not None:
                progress(report)

        pending: set[asyncio.Task[None]] = set()
        iterator = iter(items)
        while True:  # reading (parsing, fetching) runs in a thread: the loop stays free
            item = await asyncio.to_thread(next, iterator, None)
            if item is None:
                break
            if isinstance(item, FailedDocument):
                report.failed.append(item)
                if progress is not None:
                    progress(report)
                continue
            pending.add(asyncio.create_task(index(item)))
            if len(pending) >= 2 * self.config.ingest.document_concurrency:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # Indexer.index reports per document; anything else is a bug
        if pending:
            await asyncio.gather(*pending)

    def _usage_snapshot(self) -> Usage:
        return self.llm.usage.model_copy() if self.llm else Usage()

    def _usage_since(self, before: Usage) -> Usage:
        now = self._usage_snapshot()
        return Usage(
            calls=now.calls - before.calls,
            cached_calls=now.cached_calls - before.cached_calls,
            prompt_tokens=now.prompt_tokens - before.prompt_tokens,
            completion_tokens=now.completion_tokens - before.completion_tokens,
            cost_usd=round(now.cost_usd - before.cost_usd, 6),
        )

    def ingest(self, inputs: Iterable[str | Path] = (), **kwargs: Any) -> IngestReport:
        return asyncio.run(self.aingest(inputs, **kwargs))

    @staticmethod
    def run_sync(awaitable: Coroutine[Any, Any, T]) -> T:
        """Run one of the async methods from synchronous code."""
        return asyncio.run(awaitable)

    def add_records(self, records: Iterable[Any], **kwargs: Any) -> IngestReport:
        return asyncio.run(self.aadd_records(records, **kwargs))

    # -- documents -----------------------------------------------------------------------
    @property
    def registry(self) -> DocumentRegistry:
        return DocumentRegistry(self.store)

    def list_documents(
        self, *, source: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> list[DocumentRecord]:
        return self.registry.list(tenant, source)

    def get_document(self, document_id: str, *, tenant: str = DEFAULT_TENANT) -> DocumentDetail:
        """A document with its chunks, matching texts and qualifying texts."""
        detail = self.registry.detail(tenant, document_id)
        if detail is None:
            raise DocumentNotFoundError(f"no document '{document_id}' in tenant '{tenant}'")
        return detail

    def remove_document(self, document_id: str, *, tenant: str = DEFAULT_TENANT) -> None:
        if not self.registry.remove(tenant, document_id):
            raise DocumentNotFoundError(f"no document '{document_id}' in tenant '{tenant}'")

    def stats(self, *, tenant: str = DEFAULT_TENANT) -> Stats:
        return self.registry.stats(tenant)

    # -- query -------------------------------------------------------------------------
    async def aquery(
        self,
        text: str,
        *,
        top_n: int | None = None,
        top_k: int | None = None,
        filters: Filters | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> list[SearchResult]:
        """The chunks that best answer ``text``, best first."""
        if not text.strip():
            raise ConfigError("the query is empty")
        return await search(
            text,
            chains=self.query_chains(),
            embedder=self.embedder,
            store=self.store,
            tenant=tenant,
            settings=self.config.query,
            top_k=top_k or self.config.query.top_k,
            top_n=top_n or self.config.query.top_n,
            filters=filters,
        )

    def query(self, text: str, **kwargs: Any) -> list[SearchResult]:
        return asyncio.run(self.aquery(text, **kwargs))

    async def asimilar(
        self,
        text: str,
        *,
        top_n: int = 5,
        filters: Filters | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> list[SearchResult]:
        """The chunks most similar to ``text``: no query rewrite, no reranking."""
        if not text.strip():
            raise ConfigError("the text is empty")
        return await similar(
            text,
            embedder=self.embedder,
            store=self.store,
            tenant=tenant,
            top_k=max(top_n * 4, 20),
            top_n=top_n,
            filters=filters,
        )

    def format(self, text: str, results: list[SearchResult], formatter: str | None = None) -> str:
        """What the agent sees: the configured formatter chain (or the one named)."""
        return self.formatter(formatter).run(text, results)

    # -- housekeeping ------------------------------------------------------------------
    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        if self.llm is not None:
            self.llm.cache.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
