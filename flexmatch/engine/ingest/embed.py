"""Embed: every matching text of a document's chunks made a vector.

``prepare`` is a document's whole expensive part, chunk → enrich → embed, done in this
process (``LocalWork``) or on a Ray worker (``fanout``); ``commit`` writes it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from flexmatch.config import IngestConfig
from flexmatch.engine.chains.sources import SourceChains
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.embedders import Embedder, EmbeddingBatcher
from flexmatch.engine.ingest.chunk import sections_of
from flexmatch.engine.ingest.enrich import enrich, known_texts
from flexmatch.engine.ingest.threads import in_ingest_thread
from flexmatch.engine.points import MATCH, Filters
from flexmatch.engine.stores import Hit, VectorStore
from flexmatch.errors import FlexMatchError
from flexmatch.models import Chunk, Document, IngestReport, Section


@dataclass
class Enriched:
    """A document's chunks and one vector per matching text, in order: the expensive part
    of indexing, done here or on a worker (``fanout``), written by ``commit``."""

    chunks: list[Chunk]
    vectors: list[list[float]]


Embed = Callable[[list[str]], Awaitable[list[list[float]]]]
Work = Callable[[Document, SourceChains], Awaitable[Enriched]]


async def prepare(
    document: Document, chains: SourceChains, embed: Embed, limits: IngestConfig | None = None
) -> Enriched:
    """Chunk, enrich and embed one document (``embed`` batches its texts with other
    documents')."""
    sections = await sections_of(document, chains.chunker, limits or IngestConfig())
    return await enrich_and_embed(document, sections, chains, embed)


async def enrich_and_embed(
    document: Document, sections: list[Section], chains: SourceChains, embed: Embed
) -> Enriched:
    """Enrich the sections, and embed every matching text. The texts known before the
    LLM answers (the chunks' own text) are embedded while it works, the rest once it
    has."""
    known = await in_ingest_thread(known_texts, sections, chains, document)
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


class LocalWork:
    """The ``Work`` of a run in this process: its chains, its embedder through the run's
    batcher; texts the document's committed version already holds keep their stored
    vectors."""

    def __init__(
        self,
        store: VectorStore,
        tenant: str,
        embedder: Embedder,
        settings: IngestConfig,
        report: IngestReport,
        batcher: EmbeddingBatcher | None = None,
    ) -> None:
        self.store = store
        self.registry = DocumentRegistry(store)
        self.tenant = tenant
        self.embedder = embedder
        self.settings = settings
        self.report = report
        self.batcher = batcher

    async def __call__(self, document: Document, chains: SourceChains) -> Enriched:
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

        return await prepare(document, chains, embed, self.settings)

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
