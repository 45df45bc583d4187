"""The run of a query, start to end: transform → embed → search → complete → rerank →
top-N read, each stage timed (``StageTimer``); ``similar`` is the path without a
transform or a reranker.

Each source may put queries in its own form (``sources.NAME.query_transform``): a source
indexed by questions is searched with questions, one indexed by key phrases with key
phrases. Sources that resolve to the same transform and reranker form one *group*
(``plan``), searched together; a knowledge base whose sources all use ``query.*`` is one
group and takes exactly the single-group path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from flexmatch.config import QueryConfig
from flexmatch.engine.chains.base import collecting_warnings, for_sources
from flexmatch.engine.chains.plan import QueryPlan, SourceGroup
from flexmatch.engine.embedders import Embedder
from flexmatch.engine.points import Filters
from flexmatch.engine.query.rerank import read_kept, rerank
from flexmatch.engine.query.search import Retriever
from flexmatch.engine.stores import Hit, VectorStore
from flexmatch.models import SearchResult
from flexmatch.results import Answer


def group_scopes(
    groups: list[SourceGroup], default_source: str, filters: Filters | None
) -> list[tuple[SourceGroup, Filters, Filters | None]]:
    """Each group with what it searches: its own sources (when there are several groups)
    within any source the caller asked for. The default source's group also searches
    the sources the configuration no longer names (documents of a removed source stay
    findable), by leaving out the other groups' sources instead of naming its own. A
    group the caller's sources exclude is left out."""
    if len(groups) == 1:
        return [(groups[0], dict(filters or {}), None)]
    asked = (filters or {}).get("source")
    wanted: set[str] | None = None
    if asked is not None:
        wanted = {str(s) for s in asked} if isinstance(asked, list) else {str(asked)}
    configured = {s for g in groups for s in g.sources}
    scopes: list[tuple[SourceGroup, Filters, Filters | None]] = []
    for group in groups:
        if default_source in group.sources:
            others = sorted(configured - set(group.sources))
            if wanted is None:
                scopes.append((group, dict(filters or {}), {"source": others}))
                continue
            mine = [s for s in wanted if s in group.sources or s not in configured]
        else:
            mine = [s for s in group.sources if wanted is None or s in wanted]
        if mine:
            scopes.append((group, {**(filters or {}), "source": sorted(mine)}, None))
    return scopes


async def run_query(
    text: str,
    *,
    plan: QueryPlan,
    embedder: Embedder,
    store: VectorStore,
    tenant: str,
    settings: QueryConfig,
    top_k: int,
    top_n: int,
    filters: Filters | None = None,
    demotions: Demotions | None = None,
) -> Answer:
    """The query path, start to end: transform → embed → search → complete → rerank →
    demote → top-N read; ``filters`` are payload conditions (checked); ``demotions``:
    the places each candidate moves down for this query (``engine.feedback``).

    One group of sources (the usual case) is searched as one. Several: each group's
    transform puts the query in its sources' form, each group is searched and fused on
    its own, and the candidates are merged: with one reranker for all, it re-scores the
    union (the fusion reranker normalises every signal over all candidates, so sources
    compete on one scale); with different rerankers, see ``rerank.rerank``."""
    started = time.perf_counter()
    stages = StageTimer()
    scopes = group_scopes(plan.groups, plan.default_source, filters)
    groups = [group for group, _, _ in scopes]
    retrievers = [Retriever(store, tenant, settings, exclude) for _, _, exclude in scopes]
    scoped = [group_filters for _, group_filters, _ in scopes]
    group_k = _group_k(top_k, top_n, len(groups))
    with collecting_warnings() as warnings:
        with stages("transform"):
            variant_lists = await asyncio.gather(
                *(for_sources(g.sources, g.query_transform.run(text)) for g in groups)
            )
        texts = list(dict.fromkeys(v for variants in variant_lists for v in variants))

        def embed() -> list[list[float]]:
            with stages("embed"):
                return embedder.embed(texts)

        def lexical_search() -> list[list[Hit]]:
            with stages("search"):
                return [
                    r.lexical_search(variants, group_k, f)
                    for r, variants, f in zip(retrievers, variant_lists, scoped, strict=True)
                ]

        vectors, lexical = await asyncio.gather(  # BM25 needs no vectors: meanwhile
            asyncio.to_thread(embed) if texts else _none(),
            asyncio.to_thread(lexical_search),
        )
        vector_of = dict(zip(texts, vectors, strict=True))
        with stages("search"):  # and complete: every candidate gets every signal
            found = await asyncio.gather(  # the groups' searches overlap in the engine
                *(
                    asyncio.to_thread(
                        retriever.search,
                        variants,
                        [vector_of[v] for v in variants],
                        group_k,
                        group_filters,
                        hits,
                    )
                    for retriever, variants, group_filters, hits in zip(
                        retrievers, variant_lists, scoped, lexical, strict=True
                    )
                )
            )
        rerankers = [g.reranker for g in groups]
        if len({g.reranker_ref for g in groups}) > 1:
            rerankers.append(plan.arbiter)
        if any(r.reads_content for r in rerankers):
            with stages("search"):  # a reranker that reads the text: every candidate read
                read = await asyncio.to_thread(
                    lambda: [r.read(c) for r, c in zip(retrievers, found, strict=True)]
                )
            with stages("rerank"):
                reranked = await rerank(text, groups, read, plan.arbiter)
                results = (await _demoted(reranked, demotions, vectors))[:top_n]
        else:  # ranked on signals: only the top-N are read
            unread = [[c.unread() for c in candidates] for candidates in found]
            with stages("rerank"):
                ranked = await rerank(text, groups, unread, plan.arbiter)
                ranked = await _demoted(ranked, demotions, vectors)
            with stages("search"):
                results = await asyncio.to_thread(read_kept, ranked, top_n, retrievers, found)
    took = round((time.perf_counter() - started) * 1000, 1)
    return Answer(
        query=text,
        variants=texts,
        results=results,
        warnings=warnings,
        took_ms=took,
        stage_ms=stages.milliseconds(),
    )


Demotions = Callable[[list[str], list[list[float]]], dict[str, int]]
"""Places each chunk moves down for a query of these vectors (``FeedbackKeeper.demotions``)."""


async def _demoted(
    ranked: list[SearchResult], demotions: Demotions | None, vectors: list[list[float]]
) -> list[SearchResult]:
    """``ranked`` with each chunk marked unhelpful for a query near this one moved down
    its places (its score then that of the result it now follows, so scores still fall,
    and ``signals.demoted`` says how far it moved)."""
    if demotions is None or not ranked:
        return ranked
    ids = [r.chunk_id for r in ranked]
    places = await asyncio.to_thread(demotions, ids, vectors)
    if not places:
        return ranked
    order = sorted(
        range(len(ranked)),
        key=lambda i: i + places[ids[i]] + 0.5 if ranked[i].chunk_id in places else i,
    )
    moved: list[SearchResult] = []
    for new, old in enumerate(order):
        result = ranked[old]
        if result.chunk_id in places and new > old:
            signals = result.signals.model_copy(update={"demoted": new - old})
            score = min(result.score, moved[-1].score) if moved else result.score
            result = result.model_copy(update={"signals": signals, "score": score})
        moved.append(result)
    return moved


class StageTimer:
    """Seconds spent per stage of one query (a stage entered twice adds up), so the
    caller can report where a query's time went without the engine knowing how."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - started
            self.seconds[stage] = self.seconds.get(stage, 0.0) + spent

    def milliseconds(self) -> dict[str, float]:
        return {stage: round(s * 1000, 3) for stage, s in self.seconds.items()}


def _group_k(top_k: int, top_n: int, groups: int) -> int:
    """Candidates per group: ``top_k`` shared among the groups (never fewer than
    ``top_n``), so a query over several groups completes and reranks as many candidates
    as one over a single group, and costs about as much."""
    return max(top_n, -(-top_k // max(1, groups)))


async def _none() -> list[list[float]]:
    return []


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
