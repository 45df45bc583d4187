"""The ingest path: each document chunked, enriched, embedded and committed.

load (``inputs``) → chunk → enrich (matching texts + qualifying text) → embed → store,
committed through ``documents``; ``ingest_run`` drives it over a whole batch.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from flexmatch import deadlines
from flexmatch.access import ACCESS_FIELD, PUBLIC, Access, resolve_access
from flexmatch.async_bridge import run_sync
from flexmatch.config import IngestConfig, SourceConfig
from flexmatch.engine.archive import DocumentArchive
from flexmatch.engine.chains import (
    Chain,
    ChainContext,
    Chunker,
    MatchingTextChain,
    QualifyingTextChain,
    build_chain,
)
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.embedders import Embedder, EmbeddingBatcher, run_in_background
from flexmatch.engine.points import (
    CHUNK_FIELDS,
    CONTENT,
    MATCH,
    Filters,
    MatchPayload,
    filterable_metadata,
    match_point_id,
)
from flexmatch.engine.stores import Hit, StoredPoint, VectorStore
from flexmatch.errors import (
    ChainError,
    ConfigError,
    DocumentTooLargeError,
    FlexMatchError,
    WriteConflictError,
)
from flexmatch.inputs.loaders import NAMING_METADATA
from flexmatch.inputs.validators import VOLATILE_METADATA, validators
from flexmatch.models import (
    Chunk,
    Document,
    DocumentRecord,
    FailedDocument,
    IngestReport,
    MatchingText,
    Section,
    SkippedDocument,
    shared_fields,
)
from flexmatch.payloads import check_document_id, check_metadata, check_value


@dataclass
class SourceChains:
    """The ingest chains one source resolves to."""

    chunker: Chunker
    matching_text: MatchingTextChain
    qualifying_text: QualifyingTextChain
    # who may read the source's documents (``sources.NAME.access`` and ``access_rules``):
    # not part of the fingerprint, as access never changes a version
    access: Access | None = None
    access_rules: dict[str, Access] = field(default_factory=dict)

    @classmethod
    def build(cls, config: SourceConfig, context: ChainContext) -> SourceChains:
        return cls(
            chunker=build_chain(config.chunker, Chunker, context),
            matching_text=build_chain(config.matching_text, MatchingTextChain, context),
            qualifying_text=build_chain(config.qualifying_text, QualifyingTextChain, context),
            access=config.access,
            access_rules=dict(config.access_rules),
        )

    def access_of(self, document: Document) -> list[str] | None:
        """The access tokens ``document`` is stored with (see ``flexmatch.access``)."""
        where = (document.uri or document.id)[:300]
        # rules match the place in the source, never the absolute path (a knowledge base
        # under /srv/hr/ must not match "*/hr/*" for every file)
        path = str(document.metadata.get("path") or document.metadata.get("file_name") or "")
        return resolve_access(document.metadata, path, self.access_rules, self.access, where)

    def fingerprint(self) -> str:
        """Changes whenever a chain's definition changes (its YAML, params, prompt text or
        model), so the documents it made get re-indexed."""
        definitions = [chain.definition() for chain in self.all()]
        return hashlib.sha256(json.dumps(definitions, sort_keys=True).encode()).hexdigest()[:16]

    def all(self) -> list[Chain]:
        return [self.chunker, self.matching_text, self.qualifying_text]


class SourceChainCache:
    """Each source's ingest chains, built on first use and kept until ``clear``: the one
    cache of them, held by a knowledge base and by each fan-out worker. ``sources`` is
    read on every call, so a caller that swaps its config is seen; ``where`` names that
    config in the error for an unknown source."""

    def __init__(
        self,
        sources: Callable[[], Mapping[str, SourceConfig]],
        context: ChainContext,
        where: str,
    ) -> None:
        self._sources = sources
        self._context = context
        self._where = where
        self._built: dict[str, SourceChains] = {}

    def get(self, source: str) -> SourceChains:
        sources = self._sources()
        if source not in sources:
            known = ", ".join(sorted(sources))
            raise ConfigError(f"{self._where}: no source named '{source}' (sources: {known})")
        chains = self._built.get(source)
        if chains is None:
            chains = self._built[source] = SourceChains.build(sources[source], self._context)
        return chains

    def clear(self) -> None:
        self._built.clear()


@dataclass
class Enriched:
    """A document's chunks and one vector per matching text, in order: the expensive part
    of indexing, done here or on a worker (``fanout``), written by the ``Indexer``."""

    chunks: list[Chunk]
    vectors: list[list[float]]


Embed = Callable[[list[str]], Awaitable[list[list[float]]]]
Work = Callable[[Document, SourceChains], Awaitable[Enriched]]


T = TypeVar("T")

UPSERT_SLICE = 128  # points per store call (see ``Indexer._write_points``)
# The threads an ingest computes on (chunking, chains without an LLM, building and writing
# points): its own few, not asyncio's default pool, which a server's requests use (a
# search embeds its query there) and which a big upload's work would otherwise fill.
_INGEST_THREADS = ThreadPoolExecutor(
    max_workers=2, thread_name_prefix="flexmatch-ingest", initializer=run_in_background
)


async def in_ingest_thread(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on an ingest thread (in the caller's context, as to_thread)."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, function, *args)
    return await asyncio.get_running_loop().run_in_executor(_INGEST_THREADS, call)


async def off_loop(work: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that only computes (a chunker, a chain without an LLM) on an ingest
    thread with a loop of its own: on a server's event loop, a big document's chunking or
    sentence splitting would hold up every other request until it was done."""
    return await in_ingest_thread(run_sync, work)


async def _per_section(
    chain: MatchingTextChain | QualifyingTextChain, sections: list[Section], document: Document
) -> list[Any]:
    """``chain.run`` for every section: concurrently on this loop for an LLM chain (its
    calls are I/O, batched across chunks), all in one worker thread for one without."""
    if chain.uses_llm:
        return list(await asyncio.gather(*(chain.run(s, document) for s in sections)))

    async def each() -> list[Any]:
        return [await chain.run(section, document) for section in sections]

    return await off_loop(each())


async def enrich(document: Document, sections: list[Section], chains: SourceChains) -> list[Chunk]:
    """Each of the document's sections as a chunk with its matching and qualifying texts."""
    matching, qualifying = await asyncio.gather(
        _per_section(chains.matching_text, sections, document),
        _per_section(chains.qualifying_text, sections, document),
    )
    return await in_ingest_thread(_chunks, document, sections, matching, qualifying)


def _chunks(
    document: Document, sections: list[Section], matching: list[Any], qualifying: list[Any]
) -> list[Chunk]:
    """The chunks of the sections and their chains' answers (tens of thousands of models
    for a big document: built on an ingest thread, never on the loop)."""
    return [
        Chunk(
            id=f"{document.id}#{index}",
            document_id=document.id,
            index=index,
            text=section.text,
            heading_path=section.heading_path,
            location=section.location,
            qualifying_text=qualifying[index],
            matching_texts=matching[index],
        )
        for index, section in enumerate(sections)
    ]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


async def sections_of(document: Document, chunker: Chunker, limits: IngestConfig) -> list[Section]:
    """The chunker's sections of ``document``, bounded and checked: at most
    ``ingest.chunk_timeout`` seconds (a plug-in's chunker runs on a thread of its own, so
    one that hangs holds no ingest thread), at most ``ingest.max_sections`` sections and
    one per 4 characters of text (at least 100), their text at most 8 times the
    document's, and every one a ``Section``. Anything else fails this document, naming
    the chain and what it returned."""
    what = chunker.label

    async def call() -> Any:
        result = chunker.run(document)
        return await result if inspect.isawaitable(result) else result

    timeout = limits.chunk_timeout
    if type(chunker).__module__.split(".")[0] == "flexmatch":
        finished, result = await deadlines.within(off_loop(call()), timeout)
    else:
        finished, result = await deadlines.run_coroutine(call, timeout, "flexmatch-chunker")
    if not finished:
        raise ChainError(
            f"{document.uri}: {what} took longer than {timeout:g}s and was left "
            "(ingest.chunk_timeout)"
        )
    if not isinstance(result, list | tuple):
        raise ChainError(
            f"{document.uri}: {what} returned {_short(result)}, not a list of sections"
        )
    return await in_ingest_thread(_checked_sections, document, result, what, limits)


def _checked_sections(
    document: Document, result: list[Any] | tuple[Any, ...], what: str, limits: IngestConfig
) -> list[Section]:
    """``sections_of``'s checks of a chunker's output (a pass over the whole text and every
    section: on an ingest thread)."""
    size = len(document.text)
    cap = min(limits.max_sections, max(100, size // 4))
    if len(result) > cap:
        raise ChainError(
            f"{document.uri}: {what} returned {len(result):,} sections for a {size:,}-character "
            f"text, over the cap of {cap:,} (ingest.max_sections, and at most one section per "
            "4 characters)"
        )
    wrong = [(i, s) for i, s in enumerate(result) if not isinstance(s, Section)]
    if wrong:
        index, first = wrong[0]
        raise ChainError(
            f"{document.uri}: {what} returned {len(wrong):,} of {len(result):,} sections that "
            f"are not Section objects (the first, at {index}: {type(first).__name__} "
            f"{_short(first)})"
        )
    total = sum(len(section.text) for section in result)
    if total > max(8 * size, 100_000):
        raise ChainError(
            f"{document.uri}: {what} returned {total:,} characters of sections for a "
            f"{size:,}-character text (at most 8 times the text)"
        )
    return list(result)


def _known_texts(sections: list[Section], chains: SourceChains, document: Document) -> list[str]:
    """The matching texts known before any LLM answers, once each, in order."""
    known = (m.text for s in sections for m in chains.matching_text.known_texts(s, document))
    return list(dict.fromkeys(known))


async def enrich_and_embed(
    document: Document, chains: SourceChains, embed: Embed, limits: IngestConfig | None = None
) -> Enriched:
    """Enrich, and embed every matching text (``embed`` batches them with other
    documents' texts). The texts known before the LLM answers (the chunks' own text) are
    embedded while it works, the rest once it has."""
    sections = await sections_of(document, chains.chunker, limits or IngestConfig())
    known = await in_ingest_thread(_known_texts, sections, chains, document)
    early = asyncio.ensure_future(embed(known))
    try:
        chunks = await enrich(document, sections, chains)
        vectors = await in_ingest_thread(_by_text, known, await early, {})
    except BaseException:
        early.cancel()  # a failed chain's early texts are not waited for, no error unread
        early.add_done_callback(lambda task: task.cancelled() or task.exception())
        raise
    # the per-text passes run on an ingest thread: over the 48,000 texts of a big minified
    # script, each holds a server's event loop for a tenth of a second or more
    texts, rest = await in_ingest_thread(_unembedded, chunks, vectors)
    vectors = await in_ingest_thread(_by_text, rest, await embed(rest), vectors)
    return Enriched(chunks=chunks, vectors=await in_ingest_thread(_in_order, texts, vectors))


def _by_text(
    texts: list[str], vectors: list[list[float]], known: dict[str, list[float]]
) -> dict[str, list[float]]:
    """``known`` with each of ``texts`` mapped to its vector."""
    known.update(zip(texts, vectors, strict=True))
    return known


def _unembedded(
    chunks: list[Chunk], vectors: dict[str, list[float]]
) -> tuple[list[str], list[str]]:
    """Every matching text of ``chunks`` in order, and those without a vector, once each."""
    texts = [m.text for chunk in chunks for m in chunk.matching_texts]
    return texts, list(dict.fromkeys(t for t in texts if t not in vectors))


def _in_order(texts: list[str], vectors: dict[str, list[float]]) -> list[list[float]]:
    return [vectors[text] for text in texts]


class Indexer:
    """Ingest path for one run: each document checked, enriched and embedded (``work``),
    then committed.

    Unchanged documents cost nothing; exact duplicates and near-duplicate chunks are
    skipped; a failure is recorded on the document and the run goes on. ``work`` is the
    expensive part (chains and embedding): in this process by default, on Ray workers
    for a distributed ingest (``fanout``); the checks and the commit protocol around it
    are the same either way, and only this process writes.
    """

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        tenant: str,
        settings: IngestConfig,
        report: IngestReport,
        archive: DocumentArchive | None = None,
        batcher: EmbeddingBatcher | None = None,
        work: Work | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.store = store
        self.registry = DocumentRegistry(store)
        self.archive = archive
        self.batcher = batcher
        self.embedder = embedder
        self.tenant = tenant
        self.settings = settings
        self.report = report
        self.work: Work = work or self._enrich_and_embed
        self._slots = asyncio.Semaphore(concurrency or settings.document_concurrency)
        self._hashes_in_run: dict[str, Document] = {}
        self._writing: dict[str, asyncio.Lock] = {}  # one writer per document id

    async def index(self, document: Document, chains: SourceChains) -> None:
        lock = self._writing.setdefault(document.id, asyncio.Lock())
        async with self._slots, lock:
            try:
                await self._index(document, chains)
            except FlexMatchError as exc:
                self.report.record_failed(FailedDocument(uri=document.uri, error=str(exc)))
            except Exception as exc:  # a bug or an OS error: report it, keep the run going
                error = f"{document.uri}: {type(exc).__name__}: {exc}"
                self.report.record_failed(FailedDocument(uri=document.uri, error=error))

    async def _index(self, document: Document, chains: SourceChains) -> None:
        """begin → work → points → upsert → commit; a failure anywhere leaves the committed
        version as it was."""
        # off the loop: a big document's text, hash and payload check take a while
        content_hash, version, tokens = await in_ingest_thread(
            _checked, document, chains, self.settings.max_document_bytes
        )
        access = chains.access_of(document)
        record = self.registry.get(self.tenant, document.id)
        if access is None and record is not None:
            access = record.access  # a new version declaring none keeps it: never wider
        document = with_naming_of(document, record)
        if record is not None and record.source != document.source:
            # ids are per tenant: two sources (or plug-ins) naming items alike must not
            # overwrite each other's documents
            raise ConfigError(
                f"{document.uri}: document id '{document.id}' already belongs to source "
                f"'{record.source}' ({record.uri}); one source never replaces another's "
                "document (give the items ids of their own, or remove that document first)"
            )
        if await self._unchanged(document, record, version, content_hash, access, chains):
            return
        # a changed one keeps its old version
        duplicate = self._duplicate_of(document, content_hash, access)
        if duplicate is not None:
            self.report.record_duplicate(duplicate)
            return
        self._hashes_in_run[_same_text_key(content_hash, access)] = document
        begun = pending_record(document, record, content_hash)
        if begun.version is None:  # nothing committed yet: it is readable as it will be
            begun = begun.model_copy(update={"access": access})
        # else readers keep the committed version's access until the commit switches both
        pending = self.registry.begin(self.tenant, begun, version)
        try:
            enriched = await self.work(document, chains)
            points = await in_ingest_thread(
                self.points, document, enriched.chunks, version, enriched.vectors, access
            )
            await self._write_points(points)
        except Exception as exc:
            self.registry.fail(self.tenant, pending, str(exc) or type(exc).__name__)
            raise
        current = self.registry.get(self.tenant, document.id)
        if current is None or current.pending_version != version:
            raise WriteConflictError(
                f"{document.uri}: another writer replaced it while it was indexed"
            )
        stored_chunks = len({p.payload["chunk_id"] for p in points})
        if self.archive is not None:  # before the commit: a committed version is archived
            await asyncio.to_thread(self.archive.put, self.tenant, document)
        self.registry.commit(self.tenant, pending, stored_chunks, len(points), access)
        self.report.record_stored(
            document.id,
            document.uri,
            changed=record is not None and record.version is not None,
            chunks=stored_chunks,
            matching_texts=len(points),
            document_tokens=tokens,
        )

    async def _write_points(self, points: list[StoredPoint]) -> None:
        """Upsert on an ingest thread, ``UPSERT_SLICE`` points a call: the embedded store
        holds the GIL for a whole call (20,000 points: 1.6 s in which no other thread of
        the process, the event loop included, ran)."""
        for start in range(0, len(points), UPSERT_SLICE):
            await in_ingest_thread(
                self.store.upsert, self.tenant, points[start : start + UPSERT_SLICE]
            )

    async def _unchanged(
        self,
        document: Document,
        record: DocumentRecord | None,
        version: str,
        content_hash: str,
        access: list[str] | None,
        chains: SourceChains,
    ) -> bool:
        """Whether this version is the committed one (then nothing is spent on it; a
        changed access list is written onto its points, no embedding, no LLM call)."""
        if not (record and record.status == "complete"):
            return False
        if not is_current(record, version, content_hash, document.metadata, chains):
            return False
        if record.pending_version is not None:
            record = self.registry.cleanup(self.tenant, record)
        if record.access != access:
            record = await in_ingest_thread(self.registry.set_access, self.tenant, record, access)
        fresh = validators(document.metadata)
        if fresh != validators(record.metadata):  # kept for the next run's conditional read
            metadata = stored_metadata(document.metadata)
            if record.version != version:  # made when the place counted: it must stay
                named = {k: v for k, v in record.metadata.items() if k in NAMING_METADATA}
                metadata = {k: v for k, v in metadata.items() if k not in NAMING_METADATA}
                metadata |= named
            self.registry.update(self.tenant, record, metadata=metadata)
        if self.archive is not None and (
            fresh != validators(record.metadata) or not self.archive.has(self.tenant, document.id)
        ):
            await asyncio.to_thread(self.archive.put, self.tenant, document)  # kept from now
        self.report.record_unchanged(document.id, document.uri)
        return True

    def _duplicate_of(
        self, document: Document, content_hash: str, access: list[str] | None
    ) -> SkippedDocument | None:
        """An identical text already stored (or taken by this run) under another id, with
        the same access (a document is never skipped for one its readers cannot read)."""
        same = [
            r
            for r in self.registry.with_content(self.tenant, content_hash)
            if r.id != document.id and r.access == access
        ]
        if same:
            reason = f"same content as {_named(same[0].id, same[0].uri, access)}"
            return SkippedDocument(uri=document.uri, document_id=document.id, reason=reason)
        earlier = self._hashes_in_run.get(_same_text_key(content_hash, access))
        if earlier is not None and earlier.id != document.id:
            reason = f"same content as {_named(earlier.id, earlier.uri, access)} in this run"
            return SkippedDocument(uri=document.uri, document_id=document.id, reason=reason)
        return None

    async def _enrich_and_embed(self, document: Document, chains: SourceChains) -> Enriched:
        """The local work: this process's chains, its embedder through the run's batcher;
        texts the document's committed version already holds keep their stored vectors."""
        stored = await self._stored_vectors(document.id)

        async def embed(texts: list[str]) -> list[list[float]]:
            if not stored:  # a new document: nothing to reuse, no pass over its texts
                self.report.texts_embedded += len(texts)
                return await self._embed(texts) if texts else []
            fresh = await in_ingest_thread(_missing, texts, stored)
            made = await self._embed(fresh) if fresh else []
            self.report.texts_embedded += len(fresh)
            self.report.texts_reused += len(texts) - len(fresh)
            return await in_ingest_thread(_reused, texts, stored, fresh, made)

        return await enrich_and_embed(document, chains, embed, self.settings)

    async def _stored_vectors(self, document_id: str) -> dict[str, list[float]]:
        """Matching text → vector of the document's committed version. The store holds
        vectors of one embedding model (``prepare`` refuses another), and a model's
        vector depends on the text alone, so an edit re-embeds only the texts it made
        new. Reuse saves work and is never needed: a store that cannot say gives none."""
        record = self.registry.get(self.tenant, document_id)
        if record is None or record.version is None:
            return {}
        where: Filters = {"record": MATCH, "document_id": document_id, "version": record.version}
        read = functools.partial(self.store.scroll_vectors, fields=("matched_text",))
        try:
            found = await in_ingest_thread(read, self.tenant, where)
        except FlexMatchError:
            return {}
        return await in_ingest_thread(_vectors_by_text, found)

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        if self.batcher is not None:
            return await self.batcher.embed(texts)
        return await asyncio.to_thread(self.embedder.embed, texts)

    def points(
        self,
        document: Document,
        chunks: list[Chunk],
        version: str,
        vectors: list[list[float]],
        access: list[str] | None = None,
    ) -> list[StoredPoint]:
        """One point per matching text; chunks that nearly duplicate a stored one dropped.
        ``access``: the document's access tokens (none: readable by its whole tenant)."""
        texts = [(chunk, m) for chunk in chunks for m in chunk.matching_texts]
        seen = VectorSet()  # this document's chunks: a repeated page is stored once
        by_chunk: dict[str, list[tuple[MatchingText, list[float]]]] = {}
        for (chunk, matching), vector in zip(texts, vectors, strict=True):
            by_chunk.setdefault(chunk.id, []).append((matching, vector))
        points = []
        metadata = filterable_metadata(stored_metadata(document.metadata))  # whole: on the record
        of_document = {
            **shared_fields(document, MatchPayload),  # uri, source, title
            "metadata": metadata,
            "version": version,
            "access": access,
        }
        for chunk in chunks:
            pairs = by_chunk.get(chunk.id, [])
            if not pairs or self._near_duplicate(document, pairs, seen, access):
                continue
            of_chunk = {
                **of_document,
                **shared_fields(chunk, MatchPayload),  # heading_path, qualifying_text, ...
                "chunk_id": chunk.id,
                "chunk_index": chunk.index,
                "content": chunk.text,
            }
            for position, (matching, vector) in enumerate(pairs):
                payload = MatchPayload.model_validate(
                    {**of_chunk, "matched_text": matching.text, "match_kind": matching.kind}
                ).model_dump(exclude=_unstored(position, access))
                points.append(
                    StoredPoint(
                        id=match_point_id(self.tenant, chunk.id, version, position),
                        vector=vector,
                        text=matching.text,
                        payload=payload,
                    )
                )
        return points

    def _near_duplicate(
        self,
        document: Document,
        pairs: list[tuple[MatchingText, list[float]]],
        seen: VectorSet,
        access: list[str] | None,
    ) -> bool:
        """Whether this chunk's content text is (nearly) one already stored or accepted:
        only a chunk of a document with the same access counts (dropping one for a chunk
        some of its readers cannot read would hide it from them)."""
        threshold = self.settings.near_duplicate_threshold
        content = next((v for m, v in pairs if m.kind == CONTENT), pairs[0][1])
        vector = np.asarray(content, dtype=np.float32)
        if threshold is not None:
            if seen.max_similarity(vector) >= threshold:
                self.report.near_duplicate_chunks += 1
                return True
            contents: Filters = {"record": MATCH, "match_kind": CONTENT}
            if access is not None:  # overlapping or unrestricted ones; equal ones kept below
                contents[ACCESS_FIELD] = access
            hits = self.store.search(self.tenant, content, 5, contents)
            others = [
                h
                for h in hits
                if h.payload.get("document_id") != document.id
                and h.score >= threshold
                and (h.payload.get(ACCESS_FIELD) or None) == access
            ]  # usually none: then no version look-up either
            if self.registry.visible(self.tenant, others):
                self.report.near_duplicate_chunks += 1
                return True
        seen.add(vector)
        return False


class VectorSet:
    """Unit vectors, for the best cosine of a new one against those it nearly repeats.

    Each vector is filed under ``tables`` random-hyperplane signatures of ``bits`` bits
    (locality-sensitive hashing), and a new one is compared only with the vectors sharing
    a signature with it: a document's n chunks cost about n comparisons, not n²/2 (a
    10,000-chunk document took 94 s comparing each chunk with every earlier one). Equal
    vectors always share every signature; two at cosine 0.99 (the default near-duplicate
    threshold) share one in about 993 cases of 1,000, closer ones more surely still.
    """

    def __init__(self, bits: int = 16, tables: int = 8, seed: int = 0) -> None:
        self.bits = bits
        self.tables = tables
        self.seed = seed
        self._vectors: list[np.ndarray] = []
        self._planes: np.ndarray | None = None
        self._buckets: list[dict[int, list[int]]] = [{} for _ in range(tables)]
        self._weights = 1 << np.arange(bits, dtype=np.int64)

    def _keys(self, vector: np.ndarray) -> list[int]:
        if self._planes is None:
            rng = np.random.default_rng(self.seed)
            shape = (self.tables * self.bits, len(vector))
            self._planes = rng.standard_normal(shape).astype(np.float32)
        signs = (self._planes @ vector > 0).reshape(self.tables, self.bits)
        return [int(key) for key in signs.astype(np.int64) @ self._weights]

    def add(self, vector: np.ndarray) -> None:
        index = len(self._vectors)
        self._vectors.append(vector)
        for table, key in zip(self._buckets, self._keys(vector), strict=True):
            table.setdefault(key, []).append(index)

    def max_similarity(self, vector: np.ndarray) -> float:
        """The best cosine among the vectors sharing a signature with ``vector`` (-1.0
        when none does)."""
        if not self._vectors:
            return -1.0
        keys = self._keys(vector)
        near = {
            i for table, key in zip(self._buckets, keys, strict=True) for i in table.get(key, ())
        }
        if not near:
            return -1.0
        return float(np.max(np.stack([self._vectors[i] for i in near]) @ vector))


def _named(document_id: str, uri: str, access: list[str] | None) -> str:
    """The twin a duplicate is skipped for, as its writer's report names it: by id and uri
    when the whole tenant may read it; a restricted one unnamed, as the writer (a key
    writing with the source's access) may not be one of its readers."""
    if access is None or PUBLIC in access:
        return f"document {document_id} ({uri})"
    return "a document already stored with the same access"


def _same_text_key(content_hash: str, access: list[str] | None) -> str:
    return json.dumps([content_hash, access])


def _unstored(position: int, access: list[str] | None) -> set[str] | None:
    """The fields a match point leaves out: the chunk's own, except on its carrier, and
    ``access`` when it has none (its payload then is as it was before access existed)."""
    left = set() if position == 0 else set(CHUNK_FIELDS)
    if access is None:
        left.add(ACCESS_FIELD)
    return left or None


def stored_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """A document's metadata as its record and points keep it: without ``access``, which
    they hold apart (so a change of it is no change of metadata)."""
    if ACCESS_FIELD not in metadata:
        return metadata
    return {k: v for k, v in metadata.items() if k != ACCESS_FIELD}


def document_version(document: Document, chains: SourceChains) -> str:
    """Changes with the text, the metadata or the chains, so any of them re-indexes."""
    return version_of(document.content_hash, document.metadata, chains)


def version_of(
    content_hash: str, metadata: dict[str, Any], chains: SourceChains, *, named: bool = False
) -> str:
    """The version a document of this text and metadata gets from these chains (a stored
    record has both, so its current version can be checked without the document). How
    the file was named (``NAMING_METADATA``) is left out, unless ``named``: the version
    records made before that rule were given."""
    left_out = VOLATILE_METADATA | {ACCESS_FIELD} | (set() if named else NAMING_METADATA)
    kept = {k: v for k, v in metadata.items() if k not in left_out}
    blob = json.dumps([content_hash, chains.fingerprint(), kept], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def is_current(
    record: DocumentRecord,
    version: str,
    content_hash: str,
    metadata: dict[str, Any],
    chains: SourceChains,
) -> bool:
    """Whether ``record``'s committed version is ``version``, the one this text and
    metadata get now; or the one they got when a file's place in a walked folder still
    counted (read from the record), so a knowledge base made then is not re-indexed."""
    if record.version is None:
        return False
    if record.version == version:
        return True
    placed = {k: v for k, v in metadata.items() if k not in NAMING_METADATA}
    placed |= {k: v for k, v in record.metadata.items() if k in NAMING_METADATA}
    return record.version == version_of(content_hash, placed, chains, named=True)


def with_naming_of(document: Document, record: DocumentRecord | None) -> Document:
    """``document`` with the naming metadata its stored record has and it lacks: a walked
    file's ``path`` stays known when the file is next named on its own."""
    if record is None:
        return document
    kept = {
        k: v
        for k, v in record.metadata.items()
        if k in NAMING_METADATA and k not in document.metadata
    }
    if not kept:
        return document
    return document.model_copy(update={"metadata": {**document.metadata, **kept}})


def _vectors_by_text(found: list[tuple[Hit, list[float]]]) -> dict[str, list[float]]:
    """Matching text → vector of stored points (those that name their text)."""
    return {
        str(hit.payload["matched_text"]): vector
        for hit, vector in found
        if isinstance(hit.payload.get("matched_text"), str)
    }


def _missing(texts: list[str], stored: dict[str, list[float]]) -> list[str]:
    return [text for text in texts if text not in stored]


def _reused(
    texts: list[str],
    stored: dict[str, list[float]],
    fresh: list[str],
    made: list[list[float]],
) -> list[list[float]]:
    """A vector for each of ``texts``: its stored one, else the one just made."""
    new = dict(zip(fresh, made, strict=True))
    return [stored[text] if text in stored else new[text] for text in texts]


def _checked(document: Document, chains: SourceChains, limit: int) -> tuple[str, str, int]:
    """A document's size and payload checked, then its content hash, version and tokens:
    the whole-text work of an ingest, done once and off the event loop."""
    check_size(document, limit)
    check_storable(document)  # before anything of it is written, the pending record too
    return document.content_hash, document_version(document, chains), len(document.text) // 4


def check_size(document: Document, limit: int) -> None:
    """Refuse a document whose extracted text is over the byte cap."""
    size = len(document.text.encode("utf-8"))
    if size > limit:
        raise DocumentTooLargeError(
            f"{document.uri}: extracted text is {size:,} bytes, over the {limit:,}-byte cap "
            "(ingest.max_document_bytes)"
        )


def check_storable(document: Document) -> None:
    """Refuse a document whose identity or metadata the store could not hold or read back
    (see ``flexmatch.payloads``), naming the field."""
    where = (document.uri or document.id)[:300]
    check_value([document.id, document.uri, document.title, document.source], where, 2)
    check_document_id(document.id, where)
    check_metadata(document.metadata, where)


def pending_record(
    document: Document, record: DocumentRecord | None, content_hash: str
) -> DocumentRecord:
    """The record a new version of ``document`` (of text ``content_hash``) is begun on
    (its last one, updated)."""
    base = record or DocumentRecord(
        id=document.id,
        source=document.source,
        uri=document.uri,
        content_hash=content_hash,
    )
    return base.model_copy(
        update={
            "source": document.source,
            "uri": document.uri,
            "title": document.title,
            "content_hash": content_hash,
            "metadata": stored_metadata(document.metadata),
        }
    )
