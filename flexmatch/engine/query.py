"""The query path: transform → embed → first stage (``retrieval``) → rerank → top-N."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from flexmatch.config import QueryConfig
from flexmatch.engine.chains import ChainContext, QueryTransform, Reranker, build_chain
from flexmatch.engine.chains.base import collecting_warnings
from flexmatch.engine.embeddings import Embedder
from flexmatch.engine.points import Filters
from flexmatch.engine.retrieval import Retriever
from flexmatch.engine.stores import VectorStore
from flexmatch.models import SearchResult
from flexmatch.results import Answer


@dataclass
class QueryChains:
    """The query-side chains a knowledge base resolves to."""

    transform: QueryTransform
    reranker: Reranker

    @classmethod
    def build(cls, config: QueryConfig, context: ChainContext) -> QueryChains:
        return cls(
            transform=build_chain(config.transform, QueryTransform, context),
            reranker=build_chain(config.reranker, Reranker, context),
        )


async def search(
    text: str,
    *,
    chains: QueryChains,
    embedder: Embedder,
    store: VectorStore,
    tenant: str,
    settings: QueryConfig,
    top_k: int,
    top_n: int,
    filters: Filters | None = None,
) -> Answer:
    """The query path, start to end; ``filters`` are payload conditions (checked)."""
    started = time.perf_counter()
    with collecting_warnings() as warnings:
        variants = await chains.transform.run(text)
        retriever = Retriever(store, tenant, settings)
        vectors, lexical_hits = await asyncio.gather(  # BM25 needs no vectors: meanwhile
            asyncio.to_thread(embedder.embed, variants),
            asyncio.to_thread(retriever.lexical_search, variants, top_k, filters),
        )
        candidates = retriever.retrieve(variants, vectors, top_k, filters, lexical_hits)
        reranked = await chains.reranker.run(text, candidates)
    took = round((time.perf_counter() - started) * 1000, 1)
    return Answer(
        query=text,
        variants=variants,
        results=reranked[:top_n],
        warnings=warnings,
        took_ms=took,
    )


async def similar(
    text: str,
    *,
    embedder: Embedder,
    store: VectorStore,
    tenant: str,
    top_k: int,
    top_n: int,
    filters: Filters | None = None,
) -> list[SearchResult]:
    """Nearest chunks to a text, by embedding alone."""
    vectors = await asyncio.to_thread(embedder.embed, [text])
    retriever = Retriever(store, tenant, QueryConfig(retrieval="dense"))
    return retriever.retrieve([text], vectors, top_k, filters)[:top_n]
