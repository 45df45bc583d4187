"""``KnowledgeBase``: the public Python API, async first, each method with a sync twin.

A thin facade: it opens the folder's config and its ``engine.runtime`` (store, models,
workers), and hands each call to the unit that does the work (private; the methods below
are the API): ``_chains`` (``engine.chains.ResolvedChains``: what each source and the
query path resolve to), ``_ingestor`` (``engine.ingest``: load → chunk → enrich → embed →
commit, estimates, re-indexes), ``_querier`` (``engine.query``: transform → embed →
search → complete → rerank → format) and ``_documents`` (``engine.stored_documents``:
records and copies).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from flexmatch import config_templates, sharing
from flexmatch.access import DEFAULT_TENANT, Access, Principal
from flexmatch.async_bridge import async_twin, run_sync, sync_twin
from flexmatch.config import KBConfig, QueryConfig, SourceConfig, choose_source, load_config
from flexmatch.contract import KnowledgeBaseProtocol
from flexmatch.engine.archive import Original
from flexmatch.engine.chains import (
    Formatter,
    QueryChains,
    QueryPlan,
    ResolvedChains,
    SourceChains,
    with_query_config,
)
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.embedders import Embedder
from flexmatch.engine.feedback import FeedbackKeeper, Listener
from flexmatch.engine.ingest import ProgressCallback
from flexmatch.engine.ingest.fanout import RayOptions
from flexmatch.engine.ingest.ingestor import Ingestor
from flexmatch.engine.llm import LLM
from flexmatch.engine.query.gaps import gaps, golden_items
from flexmatch.engine.query.log import QueryLog
from flexmatch.engine.query.querier import Querier
from flexmatch.engine.query.run import Demotions
from flexmatch.engine.reading import DocumentReader
from flexmatch.engine.runtime import LLM_CACHE_FILE, STATE_DIR, Runtime
from flexmatch.engine.stored_documents import StoredDocuments
from flexmatch.engine.stores import VectorStore
from flexmatch.engine.writes import WriteListener, Writes
from flexmatch.errors import ConfigError
from flexmatch.evaluation import BeirDataset, Scores, Setup, run_setups
from flexmatch.golden import GoldenEvaluation, GoldenQuestion, generate_questions, run_golden
from flexmatch.inputs import named_inputs
from flexmatch.inputs.sources.items import Item
from flexmatch.models import (
    ChainUse,
    CostEstimate,
    Document,
    DocumentDetail,
    DocumentRecord,
    ExpandMode,
    FeedbackEvent,
    FeedbackReceipt,
    Gap,
    GoldenItem,
    GrepResult,
    IngestReport,
    LogEntry,
    Outline,
    Reading,
    ReindexPlan,
    SearchResult,
    Stats,
    SyncReport,
    WatchEvent,
)
from flexmatch.results import Answer, Depth
from flexmatch.sharing import through_owner
from flexmatch.sync import SyncProgress, chosen_sources, sync_sources
from flexmatch.watching import WatchPlan, follow

__all__ = [
    "DEFAULT_TENANT",
    "LLM_CACHE_FILE",
    "STATE_DIR",
    "KnowledgeBase",
    "evaluate_golden",
    "evaluate_setups",
    "generate_golden",
]
T = TypeVar("T")


class KnowledgeBase:
    """A folder with a ``flexmatch.yaml``, its chains and prompts, and a Qdrant store.

    Async first: every async method (``aingest``, ``asearch``, ``async_sync``, …) has a
    synchronous twin without the ``a`` (``ingest``, ``search``, ``sync``, …) that takes the
    same parameters, carries the same docstring and runs the method to its end; the
    document methods a served knowledge base offers too (``list_documents``, ``stats``,
    …) have an async twin with the ``a``. The operations it shares with ``Client`` are
    ``KnowledgeBaseProtocol``."""

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
        self.runtime = Runtime(path, lambda: self.config, env=env, embedder=embedder)
        self.context = self.runtime.context
        self.archive = self.runtime.archive
        self._chains = ResolvedChains(lambda: self.config, self.context, path)
        self._writes = Writes()  # every committed write ends by telling it the tenant
        self._ingestor = Ingestor(self.runtime, self._chains.source, self._writes)
        self._documents = StoredDocuments(lambda: self.store, self.archive, self._writes)
        self._reader = DocumentReader(self._documents.get, lambda: self._documents.registry)
        self.query_log = QueryLog(self.runtime.state_dir, lambda: self.config.query_log)
        self._feedback = FeedbackKeeper(
            lambda: self.store, lambda: self.embedder, lambda: self.config.feedback, self._writes
        )
        self._feedback.listeners.append(self.query_log.heard)  # every mark is logged
        self._querier = Querier(
            self.runtime, self._chains, self.query_log, self._demotions, self._reader.expand
        )
        # while this process holds the embedded store, others work through it (``sharing``)
        self._owner = sharing.Owner(self, self.runtime.store_path)
        self.runtime.on_store_held = self._owner.held
        self.runtime.may_close_store = self._owner.release

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
        """Open the knowledge base in ``path`` (its ``flexmatch.yaml``, or all defaults).
        With the embedded store, while another process holds it, the searches, ingests,
        syncs and document reads go through that process (``flexmatch.sharing``)."""
        folder, config = _folder_and_config(path, config, env)
        kind = SharedKnowledgeBase if cls is KnowledgeBase and not config.store.url else cls
        return kind(folder, config, env=env, embedder=embedder)

    # config templates: they make folders, so they need no open knowledge base
    templates = staticmethod(config_templates.templates)
    template_text = staticmethod(config_templates.template_text)
    init = staticmethod(config_templates.init)
    builtin_prompts = staticmethod(config_templates.builtin_prompts)
    eject_prompt = staticmethod(config_templates.eject_prompt)

    @property
    def llm(self) -> LLM | None:
        """The LLM of ``models`` (``None``: none configured)."""
        return self.context.llm

    @property
    def notices(self) -> list[str]:
        """Things the user should know once, e.g. which chains fell back for lack of an LLM."""
        return list(dict.fromkeys(self.context.notices))

    @property
    def store(self) -> VectorStore:
        """The vector store, opened on first use."""
        return self.runtime.store

    @property
    def embedder(self) -> Embedder:
        """The embedding model of ``models``, made on first use (loaded on first embed)."""
        return self.runtime.embedder

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
        """The ingest chains ``source`` resolves to (an unknown source is named)."""
        return self._chains.source(source)

    def query_plan(self) -> QueryPlan:
        """Every source's query chains and the groups a search runs."""
        return self._chains.query_plan()

    def query_chains(self, source: str | None = None) -> QueryChains:
        """The query transform, reranker and formatter ``source`` resolves to (its own,
        else ``query.*``); no source: those of the default source."""
        return self._chains.query_chains(source)

    def reload_chains(self) -> None:
        """Build every chain again from its files on next use (a prompt or chain file
        changed while the knowledge base is open)."""
        self._chains.reload()

    def formatter(self, name: str | None = None, *, source: str | None = None) -> Formatter:
        """The formatter named, else the one ``source`` resolves to (its own, else
        ``query.formatter``; no source: the default source's)."""
        return self._chains.formatter(name, source=source)

    def use_query_config(
        self, query: QueryConfig, sources: dict[str, SourceConfig] | None = None
    ) -> None:
        """Switch the query settings (and chains) of an open knowledge base, e.g. to compare
        setups on one ingested corpus; ``sources`` gives the sources' own query chains
        too (their ingest side is kept)."""
        self.config = with_query_config(self.config, query, sources)
        self._chains.forget_query()

    def chains_in_use(self) -> list[ChainUse]:
        """What each source and the query path resolve to (after any LLM fallback)."""
        return self._chains.in_use()

    def choose_source(self, name: object = None, *, records: bool = False) -> str:
        """The source a caller named (or the default one), checked; ``records`` asks for a
        records source. Raises ``SourceChoiceError``."""
        return choose_source(self.config, name, records=records)

    # -- ingest ------------------------------------------------------------------------
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
        principal: Principal | None = None,
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
        report's ``warnings`` say so); an admin's (no ``principal``) only.

        ``principal``: who writes (None: an admin, everything). A document already
        stored under an id it may not read is neither replaced nor described: its
        outcome is failed with the same words whichever document it is
        (docs/security.md, "Writes"). Every write method takes it alike."""
        options = RayOptions.chosen(ray, workers, retries)
        return await self._ingestor.ingest(
            named_inputs(inputs),
            source,
            tenant,
            progress,
            prune_after=prune,
            ray=options,
            writer=principal,
        )

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
        ingest, reader = functools.partial(self.aingest, tenant=tenant), self._ingestor.reader
        return await sync_sources(
            self.config, names, tenant, reader=reader, ingest=ingest, progress=progress
        )

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
        is watched). Each sync, and each path that goes or comes back, is a
        ``WatchEvent``. The store is closed between syncs, so another process
        (``flexmatch query``) can open it meanwhile."""
        names = chosen_sources(self.config, source, str(self.path))
        own = [self.runtime.state_dir, self.runtime.store_path]  # not the user's changes
        plan = WatchPlan(self.config, self.path, names, own)

        def sync_one(name: str) -> SyncReport:
            try:
                return self.sync(source=name, tenant=tenant, progress=progress)
            finally:
                self.runtime.close_store()

        return follow(plan, sync_one, stop or threading.Event())

    async def afetch_pages(self, urls: Iterable[str], *, source: str | None = None) -> list[Item]:
        """Fetch and parse web pages (the source's safety rules and deadline apply), without
        storing them: a service fetches outside its write locks, then ``aingest_documents``."""
        return await self._ingestor.fetch_pages(named_inputs(urls), source)

    async def aingest_documents(
        self,
        documents: Iterable[Item],
        *,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> IngestReport:
        """Index documents already read (``afetch_pages``); failures are reported as such.
        ``principal``: who writes (see ``aingest``)."""
        items = list(documents)
        return await self._ingestor.run(items, tenant, None, len(items), writer=principal)

    async def aestimate(
        self,
        inputs: Iterable[str | Path] = (),
        *,
        source: str | None = None,
        prune: bool = False,
        tenant: str = DEFAULT_TENANT,
    ) -> CostEstimate:
        """What ingesting ``inputs`` would cost, before anything is spent: the documents
        are read and chunked, the exact prompts rendered and checked against the LLM
        cache; nothing is stored and no LLM is called (web pages are fetched). What the
        real run would fail on is listed with its reason, and what it would skip counted;
        with ``prune``, the same checks as the real run, and what it would remove."""
        return await self._ingestor.estimate(named_inputs(inputs), source, prune, tenant)

    async def aadd_records(
        self,
        records: Iterable[Any],
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> IngestReport:
        """Ingest structured records (JSON-like objects) through a records source's
        template. ``principal``: who writes (see ``aingest``)."""
        items = self._ingestor.reader(source).records(records)
        return await self._ingestor.run(items, tenant, writer=principal)

    async def aingest_urls(
        self,
        urls: Iterable[str],
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        progress: ProgressCallback | None = None,
        principal: Principal | None = None,
    ) -> IngestReport:
        """Import web pages only: anything that is not an http(s) URL is refused, never
        read as a local path (what services exposed to callers must use).
        ``principal``: who writes (see ``aingest``)."""
        pages = await self.afetch_pages(urls, source=source)
        return await self._ingestor.run(pages, tenant, progress, len(pages), writer=principal)

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
        return await self._ingestor.read_upload(filename, data, source, document_id, metadata)

    async def aread_records(
        self, records: Iterable[Any], *, source: str | None = None, first: int = 0
    ) -> list[Item]:
        """Records rendered to documents through a records source's template, not yet
        stored; ``first`` numbers them (``record:N`` in errors) from that index."""
        return await self._ingestor.read_records(records, source, first)

    async def aingest_upload(
        self,
        filename: str,
        data: bytes,
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        document_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        principal: Principal | None = None,
    ) -> IngestReport:
        """Ingest one file given as bytes (read off the event loop, parsed in a worker
        process); with ``document_id`` it replaces that document. ``principal``: who
        writes (see ``aingest``)."""
        items = await self.aread_upload(
            filename, data, source=source, document_id=document_id, metadata=metadata
        )
        return await self._ingestor.run(items, tenant, None, len(items), writer=principal)

    async def aupdate_metadata(
        self,
        document_id: str,
        metadata: dict[str, Any],
        *,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> IngestReport:
        """Replace a document's metadata, re-indexed from its stored copy (no upload; the
        LLM cache answers every chain that saw the same text before). One ``principal``
        may not read is not found (``DocumentNotFoundError``), like one that does not
        exist."""
        document = self._documents.required_copy(tenant, document_id, principal)
        changed = document.model_copy(update={"metadata": metadata})
        return await self._ingestor.run([changed], tenant, None, 1, writer=principal)

    async def areindex_plan(
        self, *, source: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> ReindexPlan:
        """Which documents the current chains would index differently (a chain's YAML,
        params, prompt text or model changed), and what re-indexing them would cost."""
        return await self._ingestor.reindex_plan(source, tenant)

    async def areindex(
        self,
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        progress: ProgressCallback | None = None,
    ) -> IngestReport:
        """Re-index, from their stored copies, the documents whose chains changed; only the
        changed chains' LLM calls are paid for (the cache answers the others)."""
        return await self._ingestor.reindex(source, tenant, progress)

    # -- documents -----------------------------------------------------------------------
    @property
    def registry(self) -> DocumentRegistry:
        """The document records of the store (``engine.documents``)."""
        return self._documents.registry

    def list_documents(
        self,
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> list[DocumentRecord]:
        """The documents ``principal`` may read (``None``: all of them)."""
        return self._documents.list(tenant, source, principal)

    def get_document(
        self, document_id: str, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None
    ) -> DocumentDetail:
        """A document with its chunks, matching texts and qualifying texts; one
        ``principal`` may not read is not found, like one that does not exist."""
        return self._documents.get(tenant, document_id, principal)

    def outline(
        self, document_id: str, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None
    ) -> Outline:
        """A document's headings in order, each with its location and the chunks under it
        (what ``read(section=...)`` takes); one ``principal`` may not read is not found."""
        return self._reader.outline(tenant, document_id, principal)

    def read(
        self,
        document_id: str,
        *,
        section: str | None = None,
        pages: tuple[int, int] | None = None,
        lines: tuple[int, int] | None = None,
        chunk: int | None = None,
        before: int = 0,
        after: int = 0,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> Reading:
        """Part of a document: a ``section`` (a heading path as the outline gives it, or
        one heading), ``pages`` or ``lines`` (first, last), or a ``chunk`` with ``before``
        and ``after`` neighbours; none: from the beginning. At most ``MAX_READ_CHARS``
        characters (``truncated``, then ``next_chunk`` to read on); one ``principal`` may
        not read is not found."""
        part = dict(
            section=section, pages=pages, lines=lines, chunk=chunk, before=before, after=after
        )
        return self._reader.read(tenant, document_id, principal, **part)

    def grep(
        self,
        pattern: str,
        *,
        regex: bool = False,
        ignore_case: bool = False,
        filters: dict[str, Any] | None = None,
        limit: int = 20,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> GrepResult:
        """The lines of the stored text holding ``pattern`` (exactly, or as a regular
        expression with ``regex``), each cited, in the documents ``principal`` may read
        only: at most ``limit`` hits and ``GREP_SECONDS`` of matching (``truncated``)."""
        search = dict(pattern=pattern, regex=regex, ignore_case=ignore_case, filters=filters)
        return self._reader.grep(tenant, principal, **search, limit=limit)

    def remove_document(
        self, document_id: str, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None
    ) -> None:
        """Remove a document, its points and its stored copy. One ``principal`` may not
        read is not found (``DocumentNotFoundError``, the same words) and stays."""
        self._documents.remove(tenant, document_id, principal)

    def stored_copy(self, document_id: str, *, tenant: str = DEFAULT_TENANT) -> Document | None:
        """The document as its last ingest parsed it (what a re-index reads), or None: not
        in this tenant, or ingested before FlexMatch kept copies."""
        return self._documents.stored_copy(tenant, document_id)

    def get_original(
        self, document_id: str, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None
    ) -> Original:
        """The file a document was uploaded as (uploads only)."""
        return self._documents.original(tenant, document_id, principal)

    def set_access(
        self, document_id: str, access: Access | None, *, tenant: str = DEFAULT_TENANT
    ) -> DocumentRecord:
        """Change who may read a document (``None``: the whole tenant), an admin's act:
        its points' payload and record are updated, nothing re-embedded, no LLM call. The
        stored copy keeps it too, so a re-index from it keeps the new access."""
        return self._documents.set_access(tenant, document_id, access)

    def has_restricted_documents(self, *, tenant: str = DEFAULT_TENANT) -> bool:
        """Whether ``tenant`` holds a document its whole tenant may not read (an access
        list that is not ``public``): what the integrations check before reading without
        a principal."""
        return self._documents.restricted(tenant)

    def stats(self, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None) -> Stats:
        """Counts of what ``principal`` may read (``None``: everything)."""
        return self._documents.stats(tenant, principal)

    # -- query -------------------------------------------------------------------------
    async def asearch(
        self,
        text: str,
        *,
        top_n: int | None = None,
        top_k: int | None = None,
        filters: dict[str, Any] | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> Answer:
        """The whole answer to ``text``: the variants searched, the results best first.
        ``principal``: search as this person, only over documents they may read (applied
        inside the search; ``None``: everything, the admin's view). ``depth="deep"``: the
        first results seed follow-up searches, fused into one list, each result's hop in
        its explanation and the cost in ``cost`` (``query.deep``; else ``DepthError``).
        ``expand``: show a short result's, or several results' of one section,
        ``"section"`` or ``"neighbours"`` (``context``), within
        ``query.expand_budget_tokens`` (None: the config's ``query.expand``, ``"none"`` by
        default)."""
        found = self._querier.search
        return await found(text, top_n, top_k, filters, tenant, principal, depth, expand)

    async def aquery(
        self,
        text: str,
        *,
        top_n: int | None = None,
        top_k: int | None = None,
        filters: dict[str, Any] | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> list[SearchResult]:
        """The chunks that best answer ``text``, best first (``asearch`` with the same
        options also returns the variants searched)."""
        found = self._querier.search
        answer = await found(text, top_n, top_k, filters, tenant, principal, depth, expand)
        return answer.results

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
        return await self._querier.similar(text, top_n, filters, tenant, principal)

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
        differently are formatted in parts, in their rank order."""
        querier = self._querier
        return await querier.format(text, results, formatter, explain, variants, warnings)

    async def aformat_answer(
        self, answer: Answer, formatter: str | None = None, *, explain: bool = False
    ) -> str:
        """``aformat`` of a whole answer (its variants, warnings and cost included)."""
        return await self._querier.format_answer(answer, formatter, explain)

    # -- the query log ---------------------------------------------------------------------
    def _readable(self, tenant: str, principal: Principal | None) -> Callable[[str], bool] | None:
        """Whether ``principal`` may read a document, by id (None: everything, the admin)."""
        if principal is None:
            return None
        ids = {record.id for record in self.list_documents(tenant=tenant, principal=principal)}
        return ids.__contains__

    def query_log_entries(
        self,
        *,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
        limit: int | None = None,
    ) -> list[LogEntry]:
        """The logged queries of ``tenant``, newest first (``query_log.enabled`` turns the
        log on). Each shows only the results on documents ``principal`` may read
        (``None``: all of them, the admin's view)."""
        return self.query_log.entries(tenant, self._readable(tenant, principal), limit=limit)

    def query_feedback(
        self, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None
    ) -> list[FeedbackEvent]:
        """The logged feedback events of ``tenant`` on documents ``principal`` may read,
        newest first."""
        return self.query_log.feedback(tenant, self._readable(tenant, principal))

    def gaps(
        self, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None
    ) -> list[Gap]:
        """What people ask that finds nothing good (no result ``principal`` may read
        reaches ``query_log.good_score``) or that they marked unhelpful, grouped by
        meaning (``query_log.group_similarity``), the most frequent first."""
        return gaps(self.query_log, tenant, self._readable(tenant, principal), self.embedder)

    def golden_from_feedback(
        self, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None
    ) -> list[GoldenItem]:
        """Golden questions made from the feedback log: each query marked helpful expects
        the document marked helpful for it (documents only marked unhelpful for it are
        ``must_not``), over documents ``principal`` may read."""
        return golden_items(self.query_log.feedback(tenant, self._readable(tenant, principal)))

    # -- feedback ----------------------------------------------------------------------
    async def aadd_feedback(
        self,
        query: str,
        chunk_id: str,
        helpful: bool = True,
        *,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> FeedbackReceipt:
        """Say whether ``chunk_id`` answered ``query`` (docs/retrieval.md, "Learning from
        use"). Helpful: the query becomes a learned matching text of the chunk (merged
        with a near-duplicate one); unhelpful: the chunk moves down for queries near this
        one. Only a ``principal`` who may read the chunk may mark it (else
        ``DocumentNotFoundError``, as for a missing chunk); ``FeedbackRateError`` past
        ``feedback.per_minute``."""
        work = self._feedback.add
        return await asyncio.to_thread(work, query, chunk_id, helpful, tenant, principal)

    def remove_learned(self, learned_id: str, *, tenant: str = DEFAULT_TENANT) -> None:
        """Remove a learned matching text (its id: ``get_document``), an admin's act."""
        self._feedback.remove_learned(tenant, learned_id)

    def on_feedback(self, listener: Listener) -> None:
        """Call ``listener`` with each ``FeedbackEvent`` kept (e.g. a query log)."""
        self._feedback.listeners.append(listener)

    def on_write(self, listener: WriteListener) -> Callable[[], None]:
        """Call ``listener`` with the tenant after each write to it, whatever path made it
        (an ingest, sync or re-index run, a removal, an access or metadata change,
        feedback), in this process or another working through it (e.g. a search cache).
        Returns the function that stops it."""
        return self._writes.listen(listener)

    def _demotions(self, tenant: str) -> Demotions:
        return functools.partial(self._feedback.demotions, tenant)

    # -- sync twins: each async method above, run to its end: the same parameters and the
    # same docstring (``sync_twin``), for code that is not async ------------------------
    @staticmethod
    def run_sync(awaitable: Coroutine[Any, Any, T]) -> T:
        """Run one of the async methods from synchronous code."""
        return run_sync(awaitable)

    ingest = sync_twin(aingest)
    fetch_pages = sync_twin(afetch_pages)
    ingest_documents = sync_twin(aingest_documents)
    estimate = sync_twin(aestimate)
    add_records = sync_twin(aadd_records)
    ingest_urls = sync_twin(aingest_urls)
    read_upload = sync_twin(aread_upload)
    read_records = sync_twin(aread_records)
    ingest_upload = sync_twin(aingest_upload)
    update_metadata = sync_twin(aupdate_metadata)
    sync = sync_twin(async_sync)
    reindex_plan = sync_twin(areindex_plan)
    reindex = sync_twin(areindex)
    search = sync_twin(asearch)
    query = sync_twin(aquery)
    similar = sync_twin(asimilar)
    format = sync_twin(aformat)
    format_answer = sync_twin(aformat_answer)
    add_feedback = sync_twin(aadd_feedback)

    # -- async twins: each blocking method a served knowledge base (``Client``) offers
    # too, run on a worker thread (``async_twin``), so both have the same async API
    alist_documents = async_twin(list_documents)
    aget_document = async_twin(get_document)
    aoutline = async_twin(outline)
    aread = async_twin(read)
    agrep = async_twin(grep)
    aget_original = async_twin(get_original)
    aremove_document = async_twin(remove_document)
    astats = async_twin(stats)
    aquery_log_entries = async_twin(query_log_entries)
    aquery_feedback = async_twin(query_feedback)
    agaps = async_twin(gaps)
    agolden_from_feedback = async_twin(golden_from_feedback)
    aremove_learned = async_twin(remove_learned)

    # -- housekeeping ------------------------------------------------------------------
    def close(self) -> None:
        """Stop sharing the store (the calls other processes made end first), stop the
        worker processes, close the store, the LLM cache and the query log."""
        self._owner.close()
        self.runtime.close()
        self.query_log.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _folder_and_config(
    path: str | Path, config: KBConfig | None, env: dict[str, str] | None
) -> tuple[Path, KBConfig]:
    folder = Path(path).expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder}: a knowledge base is a folder, not a file")
    return folder, config or load_config(folder, env)


class SharedKnowledgeBase(KnowledgeBase):
    """A knowledge base on an embedded store that another process may hold (what
    ``KnowledgeBase.open`` gives): while one does, each call below goes through it, run
    by its engine with the caller's tenant and principal (``flexmatch.sharing``); while
    none does, it runs here and this process holds the store."""

    @property
    def shared_store(self) -> Path | None:
        """Where another holder of the store listens (None: this process holds it)."""
        return None if self._owner.serving else sharing.socket_path(self.runtime.store_path)

    asearch = through_owner(KnowledgeBase.asearch)
    aquery = through_owner(KnowledgeBase.aquery)
    asimilar = through_owner(KnowledgeBase.asimilar)
    aingest = through_owner(KnowledgeBase.aingest)
    aingest_urls = through_owner(KnowledgeBase.aingest_urls)
    aingest_upload = through_owner(KnowledgeBase.aingest_upload)
    async_sync = through_owner(KnowledgeBase.async_sync)
    aestimate = through_owner(KnowledgeBase.aestimate)
    areindex = through_owner(KnowledgeBase.areindex)
    list_documents = through_owner(KnowledgeBase.list_documents)
    get_document = through_owner(KnowledgeBase.get_document)
    remove_document = through_owner(KnowledgeBase.remove_document)
    stats = through_owner(KnowledgeBase.stats)
    outline = through_owner(KnowledgeBase.outline)
    read = through_owner(KnowledgeBase.read)
    grep = through_owner(KnowledgeBase.grep)
    has_restricted_documents = through_owner(KnowledgeBase.has_restricted_documents)
    stored_copy = through_owner(KnowledgeBase.stored_copy)
    get_original = through_owner(KnowledgeBase.get_original)
    areindex_plan = through_owner(KnowledgeBase.areindex_plan)
    aingest_documents = through_owner(KnowledgeBase.aingest_documents)
    aadd_records = through_owner(KnowledgeBase.aadd_records)
    aupdate_metadata = through_owner(KnowledgeBase.aupdate_metadata)
    set_access = through_owner(KnowledgeBase.set_access)
    aadd_feedback = through_owner(KnowledgeBase.aadd_feedback)
    remove_learned = through_owner(KnowledgeBase.remove_learned)

    search = sync_twin(asearch)
    query = sync_twin(aquery)
    similar = sync_twin(asimilar)
    ingest = sync_twin(aingest)
    ingest_urls = sync_twin(aingest_urls)
    ingest_upload = sync_twin(aingest_upload)
    sync = sync_twin(async_sync)
    estimate = sync_twin(aestimate)
    reindex = sync_twin(areindex)
    alist_documents = async_twin(list_documents)
    aget_document = async_twin(get_document)
    aremove_document = async_twin(remove_document)
    astats = async_twin(stats)
    aoutline = async_twin(outline)
    aread = async_twin(read)
    agrep = async_twin(grep)
    aget_original = async_twin(get_original)
    aremove_learned = async_twin(remove_learned)
    reindex_plan = sync_twin(areindex_plan)
    ingest_documents = sync_twin(aingest_documents)
    add_records = sync_twin(aadd_records)
    update_metadata = sync_twin(aupdate_metadata)
    add_feedback = sync_twin(aadd_feedback)


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
    open_kb = KnowledgeBase.open
    return await run_setups(
        open_kb, setups, dataset, work_dir, limit=limit, embedder=embedder, progress=progress
    )


async def evaluate_golden(
    kb: KnowledgeBase,
    questions: list[GoldenQuestion],
    work_dir: Path,
    *,
    setups: Iterable[Setup] = (),
    ablation: bool = False,
    at: int = 1,
    tenant: str = DEFAULT_TENANT,
    principal: Principal | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> GoldenEvaluation:
    """Golden questions against ``kb`` as it is, against each setup side by side (one
    that changes the ingest side re-indexes the documents into a throw-away knowledge
    base in ``work_dir``), and with each ranking signal switched off in turn
    (``ablation``); ``at``: the rank a question's answer must reach to pass. Its
    searches are neither logged nor counted: golden questions are not what people ask."""
    with kb.query_log.paused():
        return await run_golden(
            KnowledgeBase.open,
            kb,
            questions,
            work_dir,
            setups=setups,
            ablation=ablation,
            at=at,
            tenant=tenant,
            principal=principal,
            progress=progress,
        )


async def generate_golden(
    kb: KnowledgeBase,
    count: int,
    *,
    seed: int = 0,
    tenant: str = DEFAULT_TENANT,
    principal: Principal | None = None,
) -> list[GoldenQuestion]:
    """Held-out golden questions: ``kb``'s LLM writes one for each of ``count`` chunks
    drawn at random (``seed``), with a prompt unlike the indexing one."""
    return await generate_questions(
        kb, kb.llm, count, seed=seed, tenant=tenant, principal=principal, kb_dir=kb.path
    )


if TYPE_CHECKING:

    def _conforms(kb: KnowledgeBase) -> KnowledgeBaseProtocol:
        """mypy fails here when ``KnowledgeBase`` drifts from the shared protocol."""
        return kb
