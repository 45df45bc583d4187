"""The two paths through FlexMatch, each one straight line of chains.

ingest: load → chunk → enrich (matching texts + qualifying text) → embed → store
query:  transform → embed → top-K → collapse to chunks → rerank → top-N
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from flexmatch.chains.base import ChainContext, build_chain
from flexmatch.chains.chunkers import Chunker
from flexmatch.chains.matching import MatchingTextChain
from flexmatch.chains.qualifying import QualifyingTextChain
from flexmatch.chains.query_transform import QueryTransform
from flexmatch.chains.rerankers import Reranker
from flexmatch.config import QueryConfig, SourceConfig
from flexmatch.embeddings import Embedder
from flexmatch.errors import FlexMatchError
from flexmatch.models import Chunk, Document, FailedDocument, IngestReport, SearchResult
from flexmatch.stores import Filters, StoredPoint, VectorStore

POINT_NAMESPACE = uuid.UUID("6f1c2a52-8a0e-4c49-9d1b-5f4b8f1e2a77")
ProgressCallback = Callable[[IngestReport], None]


@dataclass
class SourceChains:
    """The ingest chains one source resolves to."""

    chunker: Chunker
    matching_text: MatchingTextChain
    qualifying_text: QualifyingTextChain

    @classmethod
    def build(cls, config: SourceConfig, context: ChainContext) -> SourceChains:
        return cls(
            chunker=build_chain(config.chunker, "chunker", context),  # type: ignore[arg-type]
            matching_text=build_chain(config.matching_text, "matching_text", context),  # type: ignore[arg-type]
            qualifying_text=build_chain(config.qualifying_text, "qualifying_text", context),  # type: ignore[arg-type]
        )

    def fingerprint(self) -> str:
        """Changes whenever a chain or its params change, so documents get re-indexed."""
        specs = [c.spec.model_dump(exclude={"path", "description"}) for c in self.all()]
        return hashlib.sha256(json.dumps(specs, sort_keys=True).encode()).hexdigest()[:16]

    def all(self) -> list[Chunker | MatchingTextChain | QualifyingTextChain]:
        return [self.chunker, self.matching_text, self.qualifying_text]


@dataclass
class QueryChains:
    transform: QueryTransform
    reranker: Reranker

    @classmethod
    def build(cls, config: QueryConfig, context: ChainContext) -> QueryChains:
        return cls(
            transform=build_chain(config.transform, "query_transform", context),  # type: ignore[arg-type]
            reranker=build_chain(config.reranker, "reranker", context),  # type: ignore[arg-type]
        )


class Indexer:
    """Ingest path: one document at a time, its chunks enriched concurrently."""

    def __init__(
        self, store: VectorStore, embedder: Embedder, tenant: str, document_concurrency: int = 4
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.tenant = tenant
        self._documents = asyncio.Semaphore(document_concurrency)

    async def enrich(self, document: Document, chains: SourceChains) -> list[Chunk]:
        sections = chains.chunker.run(document)

        async def one(index: int) -> Chunk:
            section = sections[index]
            matching, qualifying = await asyncio.gather(
                chains.matching_text.run(section, document),
                chains.qualifying_text.run(section, document),
            )
            return Chunk(
                id=f"{document.id}#{index}",
                document_id=document.id,
                index=index,
                text=section.text,
                heading_path=section.heading_path,
                qualifying_text=qualifying,
                matching_texts=matching,
            )

        return list(await asyncio.gather(*(one(i) for i in range(len(sections)))))

    def points(self, document: Document, chunks: list[Chunk], version: str) -> list[StoredPoint]:
        texts = [(chunk, m) for chunk in chunks for m in chunk.matching_texts]
        vectors = self.embedder.embed([m.text for _, m in texts])
        points = []
        for position, ((chunk, matching), vector) in enumerate(zip(texts, vectors, strict=True)):
            key = f"{self.tenant}\n{chunk.id}\n{version}\n{position}"
            points.append(
                StoredPoint(
                    id=str(uuid.uuid5(POINT_NAMESPACE, key)),
                    vector=vector,
                    text=matching.text,
                    payload={
                        "document_id": document.id,
                        "chunk_id": chunk.id,
                        "chunk_index": chunk.index,
                        "source": document.source,
                        "version": version,
                        "uri": document.uri,
                        "title": document.title,
                        "heading_path": chunk.heading_path,
                        "content": chunk.text,
                        "qualifying_text": chunk.qualifying_text,
                        "matched_text": matching.text,
                        "match_kind": matching.kind,
                        "metadata": document.metadata,
                    },
                )
            )
        return points

    async def index(self, document: Document, chains: SourceChains, report: IngestReport) -> None:
        """Write a document's new points, then drop its old ones: never none, never a mix
        of versions left behind once it returns."""
        async with self._documents:
            try:
                chunks = await self.enrich(document, chains)
                version = hashlib.sha256(
                    f"{document.content_hash}\n{chains.fingerprint()}".encode()
                ).hexdigest()[:24]
                points = await asyncio.to_thread(self.points, document, chunks, version)
                self.store.upsert(self.tenant, points)
                self.store.delete_document(self.tenant, document.id, keep_version=version)
            except FlexMatchError as exc:
                report.failed.append(FailedDocument(uri=document.uri, error=str(exc)))
                return
            report.documents += 1
            report.chunks += len(chunks)
            report.matching_texts += len(points)


def collapse(hits_per_variant: list[list[tuple[float, dict]]]) -> list[SearchResult]:
    """Many matching texts point to one chunk: keep each chunk's best match, best first."""
    best: dict[str, SearchResult] = {}
    for hits in hits_per_variant:
        for score, payload in hits:
            chunk_id = str(payload["chunk_id"])
            if chunk_id in best and best[chunk_id].score >= score:
                continue
            best[chunk_id] = SearchResult(
                chunk_id=chunk_id,
                document_id=str(payload["document_id"]),
                uri=str(payload.get("uri", "")),
                source=str(payload.get("source", "")),
                title=str(payload.get("title", "")),
                heading_path=list(payload.get("heading_path") or []),
                content=str(payload.get("content", "")),
                qualifying_text=str(payload.get("qualifying_text", "")),
                matched_text=str(payload.get("matched_text", "")),
                score=score,
                metadata=dict(payload.get("metadata") or {}),
            )
    return sorted(best.values(), key=lambda r: r.score, reverse=True)


async def search(
    text: str,
    *,
    chains: QueryChains,
    embedder: Embedder,
    store: VectorStore,
    tenant: str,
    top_k: int,
    top_n: int,
    filters: Filters | None = None,
) -> list[SearchResult]:
    """The query path, start to end."""
    variants = await chains.transform.run(text)
    vectors = await asyncio.to_thread(embedder.embed, variants)
    hits = [
        [(h.score, h.payload) for h in store.search(tenant, vector, top_k, filters)]
        for vector in vectors
    ]
    candidates = collapse(hits)
    reranked = await chains.reranker.run(text, candidates)
    return reranked[:top_n]
