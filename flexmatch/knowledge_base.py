"""``KnowledgeBase``: the public Python API, async first with sync wrappers.

A thin facade: it opens the folder's config, store and models, and hands each call to
the unit that does the work (``engine.ingest_run`` for ingest, ``engine.query`` for
queries, ``engine.documents`` for document management).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml

from flexmatch import resources
from flexmatch.access import ACCESS_FIELD, Access, Principal, access_filter
from flexmatch.async_bridge import run_sync
from flexmatch.config import (
    CONFIG_FILE,
    LOCAL_EMBEDDING_MODELS,
    QUERY_SIDE,
    ChainRef,
    KBConfig,
    ModelsConfig,
    QueryConfig,
    SourceConfig,
    choose_source,
    load_config,
    source_chain_refs,
)
from flexmatch.engine.archive import DocumentArchive, Original
from flexmatch.engine.chains import ChainContext, Formatter, build_chain
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.embedders import Embedder, EmbeddingBatcher, make_embedder
from flexmatch.engine.estimate import estimate
from flexmatch.engine.fanout import RayFanOut, RayOptions
from flexmatch.engine.ingest import (
    Indexer,
    SourceChainCache,
    SourceChains,
    Work,
    check_size,
    check_storable,
    is_current,
    version_of,
)
from flexmatch.engine.ingest_run import (
    READ_AHEAD,
    ActiveRuns,
    IngestRun,
    ProgressCallback,
    read_ahead,
)
from flexmatch.engine.llm import LLM
from flexmatch.engine.points import search_filters
from flexmatch.engine.query import QueryChains, QueryPlan, search, similar
from flexmatch.engine.stores import VectorStore, open_store
from flexmatch.errors import ConfigError, DocumentNotFoundError, FlexMatchError, StoreError
from flexmatch.evaluation import BeirDataset, Scores, Setup, deep_merge, evaluate
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.loaders import Item
from flexmatch.inputs.sources import SourceReader, spooled
from flexmatch.inputs.sources.types import StoredCopies, state_file
from flexmatch.models import (
    ChainUse,
    CostEstimate,
    Document,
    DocumentDetail,
    DocumentRecord,
    FailedDocument,
    IngestReport,
    ReindexPlan,
    SearchResult,
    Stats,
    SyncReport,
    WatchEvent,
)
from flexmatch.results import Answer, ResultItem, tool_result
from flexmatch.sync import SyncProgress, chosen_sources, sync_sources
from flexmatch.watching import WatchPlan, follow
from flexmatch.yamlio import load_yaml_text

DEFAULT_TENANT = "default"
STATE_DIR = ".flexmatch"
LLM_CACHE_FILE = "llm-cache.sqlite"
T = TypeVar("T")


def _raw_yaml(path: Path) -> dict[str, Any]:
    """A built-in YAML mapping as written (no ``${ENV}`` interpolation)."""
    data = load_yaml_text(path.read_text(encoding="utf-8"), str(path))
    return dict(data) if isinstance(data, dict) else {}


def _leading_comment(path: Path) -> list[str]:
    """A YAML file's leading comment lines, without their ``#``: what the file is."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return lines


def _first_sentence(lines: list[str]) -> str:
    text = " ".join(lines)
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


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
        self._embedder = embedder
        self._store: VectorStore | None = None
        self._source_chains = SourceChainCache(
            lambda: self.config.sources, self.context, str(path / CONFIG_FILE)
        )
        self._query_plan: QueryPlan | None = None
        self._formatters: dict[str, Formatter] = {}
        self._active_runs = ActiveRuns()
        self._store_lock = threading.Lock()
        self._embedder_lock = threading.Lock()
        ingest = config.ingest
        self.parse_workers = IsolatedPool(
            workers=ingest.parse_workers,
            timeout=ingest.parse_timeout,
            memory_mb=ingest.parse_memory_mb,
        )
        self.fetch_workers = IsolatedPool(
            workers=ingest.fetch_workers, memory_mb=ingest.parse_memory_mb
        )
        self.archive = DocumentArchive(path / STATE_DIR / "archive")

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
    def templates() -> dict[str, str]:
        """The built-in config templates ``init`` accepts, by name, each with what it is
        (its file's first comment line): ``default``, and every built-in evaluation setup
        (``configs/setups``), which is a fragment of a ``flexmatch.yaml`` over the default."""
        found = {
            "default": "The defaults: questions (sentences without an LLM), hybrid "
            "retrieval, the offline reranker."
        }
        for path in sorted((resources.builtin_dir("configs") / "setups").glob("*.yaml")):
            if path.stem not in found:
                found[path.stem] = _first_sentence(_leading_comment(path))
        return found

    @staticmethod
    def template_text(template: str) -> str:
        """The ``flexmatch.yaml`` a template makes: ``default`` as shipped (comments and
        all); a setup merged over it (``corpus_sources``, an evaluation setting, left
        out); or a file named by path, as it is."""
        as_path = Path(template)
        if template == "default" or as_path.suffix in (".yaml", ".yml") or len(as_path.parts) > 1:
            source = resources.find("configs", template, None, suffixes=("", ".yaml"))
            return source.read_text(encoding="utf-8")
        known = KnowledgeBase.templates()
        if template not in known:
            raise ConfigError(
                f"no template '{template}': use one of {', '.join(known)}, or the path of a "
                "flexmatch.yaml (.yaml)"
            )
        configs = resources.builtin_dir("configs")
        base = _raw_yaml(configs / "default.yaml")  # ${ENV} kept as written
        fragment = _raw_yaml(configs / "setups" / f"{template}.yaml")
        fragment.pop("corpus_sources", None)
        merged = deep_merge(base, fragment)
        about = _leading_comment(configs / "setups" / f"{template}.yaml")
        header = [f"FlexMatch knowledge base from the '{template}' template.", *about]
        comment = "".join(f"# {line}\n".replace("# \n", "#\n") for line in header)
        return comment + yaml.safe_dump(merged, sort_keys=False, allow_unicode=True)

    @staticmethod
    def init(path: str | Path, template: str = "default") -> Path:
        """Create a knowledge-base folder from a config template (``templates()``, or a
        file's path)."""
        folder = Path(path).expanduser().resolve()
        target = folder / CONFIG_FILE
        if target.exists():
            raise ConfigError(f"{target} already exists; not overwriting it")
        template_text = KnowledgeBase.template_text(template)
        folder.mkdir(parents=True, exist_ok=True)
        for sub in ("chains", "prompts"):
            (folder / sub).mkdir(exist_ok=True)
        target.write_text(template_text, encoding="utf-8")
        load_config(folder)  # a template that does not validate is a bug: say so now
        return target

    @staticmethod
    def builtin_prompts() -> list[str]:
        """The file names of the prompts FlexMatch ships (``questions.j2``, …)."""
        folder = resources.builtin_dir("prompts")
        return sorted(p.name for p in folder.iterdir() if p.is_file())

    @staticmethod
    def eject_prompt(path: str | Path, name: str, *, force: bool = False) -> Path:
        """Copy a built-in prompt into the knowledge base's ``prompts/`` folder to edit:
        the knowledge base then uses that copy (its folder is searched first). An
        existing copy is kept unless ``force``; a changed prompt re-indexes the documents
        its chain wrote (``flexmatch reindex``)."""
        known = KnowledgeBase.builtin_prompts()
        stems = {k: {Path(k).stem, k.split(".", 1)[0]} for k in known}  # facts.md, facts
        chosen = name if name in known else next((k for k in known if name in stems[k]), "")
        if not chosen or Path(name).name != name:
            raise ConfigError(f"no built-in prompt '{name}': one of {', '.join(known)}")
        target = Path(path).expanduser().resolve() / "prompts" / chosen
        if target.exists() and not force:
            raise ConfigError(f"{target} already exists; not overwriting it (--force does)")
        target.parent.mkdir(parents=True, exist_ok=True)
        source = resources.builtin_dir("prompts") / chosen
        target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
        return target

    def _make_llm(self) -> LLM | None:
        return LLM.from_config(self.config.models, self.path / STATE_DIR / LLM_CACHE_FILE)

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
                settings = self.config.store
                path = Path(settings.path)
                self._store = open_store(
                    path=path if path.is_absolute() else self.path / path,
                    url=settings.url,
                    api_key=settings.api_key,
                    collection=settings.collection,
                    lock_timeout=settings.lock_timeout,
                    cluster=settings.cluster_settings(),
                )
            return self._store

    @property
    def embedder(self) -> Embedder:
        """The embedding model of ``models``, made on first use (loaded on first embed)."""
        with self._embedder_lock:
            if self._embedder is None:
                self._embedder = make_embedder(self._embedding_models())
            return self._embedder

    def _embedding_models(self) -> ModelsConfig:
        """``models``, but a config that names no embedding model keeps the packaged one
        its store was built with: the default depends on the CPU (int8 with VNNI) and
        changed with it, and a store must go on being searched with the vectors it holds.
        A store that cannot be read now (a server that is down) leaves the default: the
        model then loads, and a mismatch is refused by the first ingest that writes."""
        models = self.config.models
        if "embedding" in models.model_fields_set:
            return models
        try:
            recorded = self.store.recorded_model()
        except StoreError:
            return models
        if recorded in LOCAL_EMBEDDING_MODELS and recorded != models.embedding:
            return models.model_copy(update={"embedding": recorded})
        return models

    def warm_up(self) -> None:
        """Load the embedding model now (a server does this before it says it is ready)."""
        self.embedder.embed(["warm up"])

    def check_store(self) -> None:
        """Open the store now (a store server: reach it), so a server learns at start and
        on each readiness check whether it can read it; ``StoreError`` says why not (held
        by another process, a server that does not answer). Nothing ingested yet passes."""
        self.store.check()

    # -- chains ------------------------------------------------------------------------
    def source_chains(self, source: str) -> SourceChains:
        return self._source_chains.get(source)

    def query_plan(self) -> QueryPlan:
        """Every source's query chains and the groups a search runs."""
        if self._query_plan is None:
            self._query_plan = QueryPlan.build(self.config, self.context)
        return self._query_plan

    def query_chains(self, source: str | None = None) -> QueryChains:
        """The query transform, reranker and formatter ``source`` resolves to (its own,
        else ``query.*``); no source: those of the default source."""
        name = self.config.default_source if source is None else source
        source_chain_refs(self.config, name, str(self.path / CONFIG_FILE))  # names it
        return self.query_plan().by_source[name]

    def reload_chains(self) -> None:
        """Build every chain again from its files on next use (a prompt or chain file
        changed while the knowledge base is open)."""
        self._source_chains.clear()
        self._query_plan = None
        self._formatters.clear()

    def formatter(self, name: str | None = None, *, source: str | None = None) -> Formatter:
        """The formatter named, else the one ``source`` resolves to (its own, else
        ``query.formatter``; no source: the default source's)."""
        if name is None:
            return self.query_chains(source).formatter
        if name not in self._formatters:
            ref = ChainRef(chain=name)
            self._formatters[name] = build_chain(ref, Formatter, self.context)
        return self._formatters[name]

    def use_query_config(
        self, query: QueryConfig, sources: dict[str, SourceConfig] | None = None
    ) -> None:
        """Switch the query settings (and chains) of an open knowledge base, e.g. to compare
        setups on one ingested corpus; ``sources`` gives the sources' own query chains
        too (their ingest side is kept)."""
        update: dict[str, Any] = {"query": query}
        if sources is not None:
            update["sources"] = {
                name: own.model_copy(
                    update={f: getattr(sources[name], f) for f in QUERY_SIDE if name in sources}
                )
                for name, own in self.config.sources.items()
            }
        self.config = self.config.model_copy(update=update)
        self._query_plan = None
        self._formatters = {}

    def chains_in_use(self) -> list[ChainUse]:
        """What each source and the query path resolve to (after any LLM fallback)."""
        placed = [
            (f"source {name}", chain)
            for name in self.config.sources
            for chain in self.source_chains(name).all()
        ]
        for name, chains in self.query_plan().by_source.items():
            refs = source_chain_refs(self.config, name)
            for kind in QUERY_SIDE:
                where = f"source {name}" if refs[kind].own else "query"
                placed.append((where, getattr(chains, kind)))
        placed = list(dict.fromkeys(placed))  # a query.* chain once, not once per source
        return [
            ChainUse(where=at, kind=c.kind, chain=c.spec.name, type=c.spec.type, file=c.spec.path)
            for at, c in placed
        ]

    def choose_source(self, name: object = None, *, records: bool = False) -> str:
        """The source a caller named (or the default one), checked; ``records`` asks for a
        records source. Raises ``SourceChoiceError``."""
        return choose_source(self.config, name, records=records)

    # -- ingest ------------------------------------------------------------------------
    def _reader(
        self, source: str | None, tenant: str | None = None, fanout: RayFanOut | None = None
    ) -> SourceReader:
        """The source's reader; with ``tenant``, it sees what that tenant holds of the
        source (so unchanged pages and files are not fetched or parsed again); with
        ``fanout``, it parses and fetches on those Ray workers."""
        name = source or self.config.default_source
        self.source_chains(name)  # validates the name and the chains up front
        return SourceReader(
            name,
            self.config.sources[name],
            self.path,
            self.config.ingest,
            fanout.pool("parse") if fanout else self.parse_workers,
            fanout.pool("fetch") if fanout else self.fetch_workers,
            stored=None if tenant is None else self._stored(name, tenant),
            where=str(self.path / CONFIG_FILE),
        )

    def _stored(self, source: str, tenant: str) -> StoredCopies:
        """What ``tenant`` holds of ``source``: committed metadata (validators, version
        hints) and stored copies by document id, and the source's state file. The
        metadata is read now, at once, and a store opened for it closed again: no store
        is held (locked) while web servers answer."""
        with self._store_lock:
            was_open = self._store is not None
        store = self.store
        try:
            records = DocumentRegistry(store).list(tenant, source) if store.exists() else []
        finally:
            if not was_open:
                self._close_store()
        committed = {r.id: r.metadata for r in records if r.status == "complete"}
        return StoredCopies(
            metadata=committed.get,
            document=lambda document_id: self.archive.get(tenant, document_id),
            state_file=state_file(self.path / STATE_DIR / "sources", tenant, source),
        )

    def _prune(self, reader: SourceReader, report: IngestReport, tenant: str) -> None:
        """Remove the source's documents this run did not reach, or found gone; never
        after a run that did not see the whole source."""
        log = reader.log
        if log.incomplete or log.documents == 0:
            reasons = list(dict.fromkeys(log.incomplete))  # the first three, and a count
            more = f"; and {len(reasons) - 3} more" if len(reasons) > 3 else ""
            why = "; ".join(reasons[:3]) + more or "nothing could be read"
            report.warnings.append(f"not pruned: {why}")
            return
        keep = log.reached - log.gone
        for record in self.list_documents(source=reader.name, tenant=tenant):
            if record.id not in keep:
                self.remove_document(record.id, tenant=tenant)
                report.removed.append(record.uri)

    async def _run(
        self,
        items: Iterable[Item],
        tenant: str,
        progress: ProgressCallback | None = None,
        planned: int = 0,
        *,
        work: Work | None = None,
        concurrency: int | None = None,
    ) -> IngestReport:
        """Index ``items``; ``work`` (enrich and embed) runs here unless another is given
        (Ray workers), with ``concurrency`` documents in flight."""
        report = IngestReport(planned=planned)
        batcher = EmbeddingBatcher(self.embedder, self.config.models.embedding_batch_size)
        concurrency = concurrency or self.config.ingest.document_concurrency
        indexer = Indexer(
            self.store,
            self.embedder,
            tenant,
            self.config.ingest,
            report,
            self.archive,
            batcher,
            work=work,
            concurrency=concurrency,
        )
        run = IngestRun(
            report=report,
            index=lambda document: indexer.index(document, self.source_chains(document.source)),
            registry=DocumentRegistry(self.store),
            llm=self.llm,
            concurrency=concurrency,
            tenant=tenant,
            active=self._active_runs,
            index_min_points=self.config.store.index_min_points,
        )
        # off the event loop: creating a store takes ~0.2 s
        await asyncio.to_thread(self.store.prepare, self.embedder.name, self.embedder.dimension)
        return await run.run(items, progress=progress)

    async def aingest(
        self,
        inputs: Iterable[str | Path] = (),
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        progress: ProgressCallback | None = None,
        ray: bool | str = False,
        workers: int = 2,
        retries: int = 2,
        prune: bool = False,
    ) -> IngestReport:
        """Load, chunk, enrich, embed and store every document in ``inputs`` (files,
        folders, JSON Lines corpora, http(s) URLs; records files for a records source).

        ``progress`` gets the report after each document; ``report.planned`` is the
        number of documents found, known from the first call on.

        ``ray``: parse, enrich and embed on ``workers`` Ray workers (the ``ray`` extra):
        ``True`` starts a local Ray cluster for the run, a string is the address of a
        running one; the checks and the writes stay in this process, so the result is
        that of a local ingest. ``retries``: how often the unfinished work of a worker
        that died is tried again before its documents are reported failed.

        ``prune``: afterwards, remove the source's documents this run did not reach (a
        file deleted, a page no longer linked or answering 404/410); only for a
        whole-source run (no ``inputs``) of a source that lists itself whole (files and
        records with ``paths``, web), never after a run that could not see all of it (the
        report's ``warnings`` say so)."""
        inputs = list(inputs)
        if ray is False:
            return await self._ingest(inputs, source, tenant, progress, prune)
        address = ray if isinstance(ray, str) and ray else None
        options = RayOptions(address=address, workers=workers, retries=retries)
        # the workers embed with the model this process chose (no second look at the store)
        models = self.config.models.model_copy(update={"embedding": self.embedder.name})
        async with RayFanOut.start(
            options,
            kb_dir=self.path,
            config=self.config.model_copy(update={"models": models}),
            env=self.context.env,
            llm_cache=self.path / STATE_DIR / LLM_CACHE_FILE if self.llm else None,
            usage=self.llm.usage if self.llm else None,
            embedding_model=models.embedding,
        ) as fanout:
            return await self._ingest(inputs, source, tenant, progress, prune, fanout)

    async def _ingest(
        self,
        inputs: list[str | Path],
        source: str | None,
        tenant: str,
        progress: ProgressCallback | None,
        prune: bool,
        fanout: RayFanOut | None = None,
    ) -> IngestReport:
        """One ingest; with ``fanout``, parsing, fetching, enrichment and embedding run on
        its Ray workers, while reading, the checks and the writes stay here, as they are."""
        reader = self._reader(source, tenant, fanout)
        if prune and inputs:
            raise ConfigError("prune follows a whole-source run only: name no inputs with it")
        if prune and not reader.prunable:
            raise ConfigError(
                f"source '{reader.name}' (type '{reader.config.type}') cannot be pruned: its "
                f"runs do not list the whole source; set sources.{reader.name}.paths (files "
                "and records) or urls (web) in flexmatch.yaml"
            )
        plan = await asyncio.to_thread(reader.plan, inputs)
        total = await asyncio.to_thread(lambda: plan.total)
        # web pages are fetched first (concurrently; a crawl's spooled to a file), so no
        # store is held while servers answer
        pages = await self._fetch(reader, plan.urls)
        crawled = await asyncio.to_thread(spooled, reader.read_stream(plan))
        items = itertools.chain(pages, crawled, reader.read(plan, urls=False, stream=False))
        report = await self._run(
            items,
            tenant,
            progress,
            total,
            work=fanout.work if fanout else None,
            concurrency=fanout.concurrency if fanout else None,
        )
        report.not_modified = reader.log.not_modified
        report.warnings.extend(reader.log.warnings)  # limits applied while reading
        if plan.stream is not None:  # a crawl's plan was its page limit; now it is known
            report.planned = report.processed
        if prune:
            await asyncio.to_thread(self._prune, reader, report, tenant)
        return report

    async def _fetch(self, reader: SourceReader, urls: list[str]) -> list[Item]:
        """Web pages, fetched concurrently (each one bounded by its deadline)."""
        slots = asyncio.Semaphore(self.config.ingest.fetch_workers)

        async def one(url: str) -> Item:
            async with slots:
                return await asyncio.to_thread(reader.read_url, url)

        return list(await asyncio.gather(*(one(url) for url in urls)))

    async def afetch_pages(self, urls: Iterable[str], *, source: str | None = None) -> list[Item]:
        """Fetch and parse web pages (the source's safety rules and deadline apply), without
        storing them: a service fetches outside its write locks, then ``aingest_documents``."""
        return await self._fetch(self._reader(source), list(urls))

    async def aingest_documents(
        self, documents: Iterable[Item], *, tenant: str = DEFAULT_TENANT
    ) -> IngestReport:
        """Index documents already read (``afetch_pages``); failures are reported as such."""
        items = list(documents)
        return await self._run(items, tenant, None, len(items))

    async def aestimate(
        self, inputs: Iterable[str | Path] = (), *, source: str | None = None
    ) -> CostEstimate:
        """What ingesting ``inputs`` would cost, before anything is spent: the documents
        are read and chunked, the exact prompts rendered and checked against the LLM
        cache; nothing is stored and no LLM is called (web pages are fetched). What the
        real run would fail on is listed with its reason, and what it would skip counted."""
        reader = self._reader(source)
        plan = await asyncio.to_thread(reader.plan, inputs)
        pages = await self._fetch(reader, plan.urls)
        failed: list[FailedDocument] = []
        skipped: dict[str, int] = {}
        limit = self.config.ingest.max_document_bytes

        def indexable(item: Item) -> Document | None:
            """``item`` if the real run would index it; else its failure or skip noted."""
            if isinstance(item, Document):
                try:  # the checks the indexer makes before it writes anything
                    check_size(item, limit)
                    check_storable(item)
                    return item
                except FlexMatchError as exc:
                    item = FailedDocument(uri=item.uri, error=str(exc))
            if item.skipped is not None:
                skipped[item.skipped] = skipped.get(item.skipped, 0) + 1
            else:
                failed.append(item)
            return None

        async def documents() -> AsyncIterator[Document]:  # read as they are estimated
            for page in pages:
                if (document := indexable(page)) is not None:
                    yield document
            async for item in read_ahead(reader.read(plan, urls=False), READ_AHEAD):
                if (document := indexable(item)) is not None:
                    yield document

        result = await estimate(documents(), self.source_chains, self.llm)
        return result.model_copy(update={"failed": failed, "skipped": skipped})

    async def aadd_records(
        self,
        records: Iterable[Any],
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> IngestReport:
        """Ingest structured records (JSON-like objects) through a records source's template."""
        return await self._run(self._reader(source).records(records), tenant)

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
        pages = await self._fetch(self._reader(source), list(urls))
        return await self._run(pages, tenant, progress, len(pages))

    async def aread_upload(
        self,
        filename: str,
        data: bytes,
        *,
        source: str | None = None,
        document_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> list[Item]:
        """The documents in a file given as bytes (read off the event loop, parsed in a
        worker process), not yet stored; ``aingest_documents`` stores them."""
        reader = self._reader(source)
        return await asyncio.to_thread(reader.upload, filename, data, document_id, metadata)

    async def aread_records(
        self, records: Iterable[Any], *, source: str | None = None, first: int = 0
    ) -> list[Item]:
        """Records rendered to documents through a records source's template, not yet
        stored; ``first`` numbers them (``record:N`` in errors) from that index."""
        reader = self._reader(source)
        return await asyncio.to_thread(lambda: list(reader.records(records, first)))

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
        """Ingest one file given as bytes (read off the event loop, parsed in a worker
        process); with ``document_id`` it replaces that document."""
        items = await self.aread_upload(
            filename, data, source=source, document_id=document_id, metadata=metadata
        )
        return await self._run(items, tenant, None, len(items))

    async def async_sync(
        self,
        *,
        source: str | list[str] | None = None,
        tenant: str = DEFAULT_TENANT,
        progress: SyncProgress | None = None,
    ) -> SyncReport:
        """Bring every source (or those named) up to date: each lists its own items,
        ingests what is new or changed and, when its listing is whole, removes what is
        gone; one that cannot list itself is skipped, one that fails does not stop the
        others. ``progress`` gets each source's name and its report so far."""
        names = chosen_sources(self.config, source, str(self.path))

        def ingest(
            name: str, prune: bool, tick: ProgressCallback
        ) -> Coroutine[Any, Any, IngestReport]:
            return self.aingest(source=name, tenant=tenant, progress=tick, prune=prune)

        return await sync_sources(
            self.config, names, tenant, reader=self._reader, ingest=ingest, progress=progress
        )

    def sync(
        self,
        *,
        source: str | list[str] | None = None,
        tenant: str = DEFAULT_TENANT,
        progress: SyncProgress | None = None,
    ) -> SyncReport:
        """``async_sync`` from synchronous code."""
        return run_sync(self.async_sync(source=source, tenant=tenant, progress=progress))

    def watch(
        self,
        *,
        source: str | list[str] | None = None,
        tenant: str = DEFAULT_TENANT,
        progress: SyncProgress | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[WatchEvent]:
        """Sync every source (or those named), then follow the folders and files of the
        files and records sources and sync a source again, within seconds, each time
        what it reads changes; until ``stop`` is set (or Ctrl-C; at once when no source
        is watched). Each sync, and each
        path that goes or comes back, is a ``WatchEvent``. The store is closed between
        syncs, so another process (``flexmatch query``) can open it meanwhile."""
        names = chosen_sources(self.config, source, str(self.path))
        store = Path(self.config.store.path)
        ignored = [self.path / STATE_DIR, store if store.is_absolute() else self.path / store]
        plan = WatchPlan(self.config, self.path, names, ignored)

        def sync_one(name: str) -> SyncReport:
            try:
                return self.sync(source=name, tenant=tenant, progress=progress)
            finally:
                self._close_store()

        return follow(plan, sync_one, stop or threading.Event())

    def ingest(self, inputs: Iterable[str | Path] = (), **kwargs: Any) -> IngestReport:
        return run_sync(self.aingest(inputs, **kwargs))

    def add_records(self, records: Iterable[Any], **kwargs: Any) -> IngestReport:
        return run_sync(self.aadd_records(records, **kwargs))

    @staticmethod
    def run_sync(awaitable: Coroutine[Any, Any, T]) -> T:
        """Run one of the async methods from synchronous code."""
        return run_sync(awaitable)

    # -- documents -----------------------------------------------------------------------
    @property
    def registry(self) -> DocumentRegistry:
        return DocumentRegistry(self.store)

    def list_documents(
        self,
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> list[DocumentRecord]:
        """The documents ``principal`` may read (``None``: all of them)."""
        return self.registry.list(tenant, source, principal)

    def get_document(
        self,
        document_id: str,
        *,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> DocumentDetail:
        """A document with its chunks, matching texts and qualifying texts; one
        ``principal`` may not read is not found, like one that does not exist."""
        detail = self.registry.detail(tenant, document_id, principal)
        if detail is None:
            raise DocumentNotFoundError(f"no document '{document_id}' in tenant '{tenant}'")
        return detail

    def remove_document(self, document_id: str, *, tenant: str = DEFAULT_TENANT) -> None:
        if not self.registry.remove(tenant, document_id):
            raise DocumentNotFoundError(f"no document '{document_id}' in tenant '{tenant}'")
        self.archive.remove(tenant, document_id)

    def _archived(self, document_id: str, tenant: str) -> Document:
        self.get_document(document_id, tenant=tenant)  # not found in this tenant: say so
        document = self.archive.get(tenant, document_id)
        if document is None:
            raise DocumentNotFoundError(
                f"document '{document_id}' has no stored copy (it was ingested before "
                "FlexMatch kept one); ingest it again from its source"
            )
        return document

    def stored_copy(self, document_id: str, *, tenant: str = DEFAULT_TENANT) -> Document | None:
        """The document as its last ingest parsed it (what a re-index reads), or None: not
        in this tenant, or ingested before FlexMatch kept copies."""
        return self.archive.get(tenant, document_id)

    def get_original(
        self,
        document_id: str,
        *,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> Original:
        """The file a document was uploaded as (uploads only)."""
        self.get_document(document_id, tenant=tenant, principal=principal)
        original = self.archive.original(tenant, document_id)
        if original is None:
            raise DocumentNotFoundError(
                f"document '{document_id}' was not uploaded as a file: no original is kept"
            )
        return original

    def set_access(
        self, document_id: str, access: Access | None, *, tenant: str = DEFAULT_TENANT
    ) -> DocumentRecord:
        """Change who may read a document (``None``: the whole tenant), an admin's act:
        its points' payload and record are updated, nothing re-embedded, no LLM call. The
        stored copy keeps it too, so a re-index from it keeps the new access."""
        record = self.registry.get(tenant, document_id)
        if record is None:
            raise DocumentNotFoundError(f"no document '{document_id}' in tenant '{tenant}'")
        tokens = access.tokens() if access is not None else None
        archived = self.archive.get(tenant, document_id)
        if archived is not None:
            metadata = {k: v for k, v in archived.metadata.items() if k != ACCESS_FIELD}
            if access is not None:
                metadata[ACCESS_FIELD] = access.model_dump()
            self.archive.put(tenant, archived.model_copy(update={"metadata": metadata}))
        return self.registry.set_access(tenant, record, tokens)

    async def aupdate_metadata(
        self, document_id: str, metadata: dict[str, Any], *, tenant: str = DEFAULT_TENANT
    ) -> IngestReport:
        """Replace a document's metadata, re-indexed from its stored copy (no upload; the
        LLM cache answers every chain that saw the same text before)."""
        document = self._archived(document_id, tenant)
        changed = document.model_copy(update={"metadata": metadata})
        return await self._run([changed], tenant, None, 1)

    # -- re-indexing ---------------------------------------------------------------------
    async def areindex_plan(
        self, *, source: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> ReindexPlan:
        """Which documents the current chains would index differently (a chain's YAML,
        params, prompt text or model changed), and what re-indexing them would cost."""
        if source is not None:
            self.source_chains(source)  # an unknown source is named
        plan = ReindexPlan(tenant=tenant, source=source)
        documents: list[Document] = []
        for record in self.list_documents(source=source, tenant=tenant):
            plan.documents += 1
            if record.source not in self.config.sources:
                continue  # its source was removed from the config: nothing to index it with
            chains = self.source_chains(record.source)
            current = version_of(record.content_hash, record.metadata, chains)
            fresh = is_current(record, current, record.content_hash, record.metadata, chains)
            if fresh and record.status == "complete":
                continue
            plan.stale.append(record.id)
            archived = self.archive.get(tenant, record.id)
            if archived is None:
                plan.missing.append(record.id)
            else:
                documents.append(archived)
        plan.estimate = await estimate(documents, self.source_chains, self.llm)
        return plan

    async def areindex(
        self,
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        progress: ProgressCallback | None = None,
    ) -> IngestReport:
        """Re-index, from their stored copies, the documents whose chains changed; only the
        changed chains' LLM calls are paid for (the cache answers the others)."""
        plan = await self.areindex_plan(source=source, tenant=tenant)
        missing = set(plan.missing)
        items: list[Item] = [
            document
            for document_id in plan.stale
            if document_id not in missing
            and (document := self.archive.get(tenant, document_id)) is not None
        ]
        items += [
            FailedDocument(
                uri=document_id, error=f"{document_id}: no stored copy; ingest it from its source"
            )
            for document_id in plan.missing
        ]
        return await self._run(items, tenant, progress, len(items))

    def reindex(self, **kwargs: Any) -> IngestReport:
        return run_sync(self.areindex(**kwargs))

    def stats(self, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None) -> Stats:
        """Counts of what ``principal`` may read (``None``: everything)."""
        return self.registry.stats(tenant, principal)

    # -- query -------------------------------------------------------------------------
    async def asearch(
        self,
        text: str,
        *,
        top_n: int | None = None,
        top_k: int | None = None,
        filters: dict[str, Any] | None = None,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> Answer:
        """The whole answer to ``text``: the variants searched, the results best first.
        ``principal``: search as this person, only over documents they may read (applied
        inside the search; ``None``: everything, the admin's view)."""
        if not text.strip():
            raise ConfigError("the query is empty")
        return await search(
            text,
            plan=self.query_plan(),
            embedder=self.embedder,
            store=self.store,
            tenant=tenant,
            settings=self.config.query,
            top_k=top_k or self.config.query.top_k,
            top_n=top_n or self.config.query.top_n,
            filters={**search_filters(filters), **access_filter(principal)},
        )

    async def aquery(self, text: str, **kwargs: Any) -> list[SearchResult]:
        """The chunks that best answer ``text``, best first (``asearch`` has the same
        options and also returns the variants searched)."""
        return (await self.asearch(text, **kwargs)).results

    def search(self, text: str, **kwargs: Any) -> Answer:
        return run_sync(self.asearch(text, **kwargs))

    def query(self, text: str, **kwargs: Any) -> list[SearchResult]:
        return run_sync(self.aquery(text, **kwargs))

    async def asimilar(
        self,
        text: str,
        *,
        top_n: int = 5,
        filters: dict[str, Any] | None = None,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> list[SearchResult]:
        """The chunks most similar to ``text``: no query rewrite, no reranking; only of
        documents ``principal`` may read."""
        if not text.strip():
            raise ConfigError("the text is empty")
        return await similar(
            text,
            embedder=self.embedder,
            store=self.store,
            tenant=tenant,
            top_k=max(top_n * 4, 20),
            top_n=top_n,
            filters={**search_filters(filters), **access_filter(principal)},
        )

    async def aformat(
        self,
        text: str,
        results: list[SearchResult],
        formatter: str | None = None,
        *,
        explain: bool = False,
        variants: list[str] | None = None,
        warnings: list[str] | None = None,
    ) -> str:
        """What the agent sees: the formatter chain named, else each result's source's
        (its own, else ``query.formatter``), over the tool result; ``explain`` adds each
        result's signals and the variants searched. Results whose sources format
        differently are formatted in parts, one per run of results with the same
        formatter, so the text keeps their rank order."""
        result = tool_result(text, results, explain=explain, variants=variants, warnings=warnings)
        if formatter is not None:
            return await self.formatter(formatter).run(result)
        runs: list[tuple[Formatter, list[ResultItem]]] = []  # in rank order
        for item in result.results:
            chosen = self.formatter(source=self._known_source(item.source))
            if runs and runs[-1][0] is chosen:
                runs[-1][1].append(item)
            else:
                runs.append((chosen, [item]))
        if len({id(chosen) for chosen, _ in runs}) <= 1:
            return await (runs[0][0] if runs else self.formatter()).run(result)
        texts = []
        for chosen, items in runs:
            texts.append(await chosen.run(result.model_copy(update={"results": items})))
        return "\n\n".join(texts)

    def _known_source(self, name: str) -> str | None:
        """``name`` if it is a configured source (a removed one formats as the default)."""
        return name if name in self.config.sources else None

    async def aformat_answer(
        self, answer: Answer, formatter: str | None = None, *, explain: bool = False
    ) -> str:
        return await self.aformat(
            answer.query,
            answer.results,
            formatter,
            explain=explain,
            variants=answer.variants,
            warnings=answer.warnings,
        )

    def format(
        self,
        text: str,
        results: list[SearchResult],
        formatter: str | None = None,
        **kwargs: Any,
    ) -> str:
        return run_sync(self.aformat(text, results, formatter, **kwargs))

    # -- housekeeping ------------------------------------------------------------------
    def _close_store(self) -> None:
        """Close the store until the next call opens it again (its lock freed)."""
        with self._store_lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def close(self) -> None:
        self.parse_workers.close()
        self.fetch_workers.close()
        self._close_store()
        if self.llm is not None:
            self.llm.cache.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def evaluate_setups(
    setups: list[Setup],
    dataset: BeirDataset,
    work_dir: Path,
    *,
    limit: int | None = None,
    embedder: Embedder | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, tuple[IngestReport, Scores]]:
    """Ingest the corpus once per distinct ingest side, then run each setup's queries."""
    groups: dict[str, list[Setup]] = {}
    for setup in setups:
        groups.setdefault(setup.ingest_key, []).append(setup)
    results: dict[str, tuple[IngestReport, Scores]] = {}
    total = min(limit or len(dataset.queries), len(dataset.queries))
    loaded: dict[str, Embedder] = {}  # without ``embedder``: each model loaded once
    for index, members in enumerate(groups.values()):
        folder = work_dir / f"kb-{index}"
        model = members[0].config.models.embedding
        kb = KnowledgeBase.open(
            folder, config=members[0].config, env={}, embedder=embedder or loaded.get(model)
        )
        with kb:
            loaded.setdefault(model, kb.embedder)
            if progress is not None:
                progress(f"ingest for {', '.join(m.name for m in members)}", 0, 1)
            parts = members[0].corpus_parts(dataset.corpus, work_dir / f"corpus-{index}")
            report = IngestReport.combined(
                [await kb.aingest([part], source=source) for part, source in parts]
            )
            for setup in members:
                kb.use_query_config(setup.config.query, setup.config.sources)
                done = 0

                def tick(name: str = setup.name) -> None:
                    nonlocal done
                    done += 1
                    if progress is not None:
                        progress(name, done, total)

                scores = await evaluate(kb, dataset, limit, on_query=tick)
                results[setup.name] = (report, scores)
    return results
