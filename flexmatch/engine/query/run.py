"""The query path: transform → embed → search → complete (``retrieval``: candidates with
every signal) → rerank → top-N read; ``formatting`` makes the text an agent reads.

Each source may put queries in its own form (``sources.NAME.query_transform``): a source
indexed by questions is searched with questions, one indexed by key phrases with key
phrases. Sources that resolve to the same transform and reranker form one *group*,
searched together; a knowledge base whose sources all use ``query.*`` is one group and
takes exactly the single-group path.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from flexmatch.config import ChainRef, KBConfig, QueryConfig, source_chain_refs
from flexmatch.engine.chains import (
    ChainContext,
    Formatter,
    QueryTransform,
    Reranker,
    build_chain,
)
from flexmatch.engine.chains.base import collecting_warnings, for_sources
from flexmatch.engine.embedders import Embedder
from flexmatch.engine.points import Filters
from flexmatch.engine.query.search import Candidate, Retriever
from flexmatch.engine.stores import Hit, VectorStore
from flexmatch.models import SearchResult
from flexmatch.results import Answer


@dataclass
class QueryChains:
    """The query-side chains one source resolves to (its own, else ``query.*``)."""

    query_transform: QueryTransform
    reranker: Reranker
    formatter: Formatter


@dataclass
class SourceGroup:
    """Sources searched the same way: one transform, one reranker, one search."""

    sources: list[str]
    query_transform: QueryTransform
    reranker: Reranker
    query_transform_ref: str
    reranker_ref: str


@dataclass
class QueryPlan:
    """Every source's query chains, and the groups a search runs."""

    by_source: dict[str, QueryChains]
    groups: list[SourceGroup]
    default_source: str
    arbiter: Reranker  # query.reranker: ranks the union when groups rerank differently

    @classmethod
    def build(cls, config: KBConfig, context: ChainContext) -> QueryPlan:
        built: dict[tuple[str, str], object] = {}  # one chain object per distinct reference

        def chain(ref: ChainRef, kind: type) -> tuple[object, str]:
            key = (kind.__name__, json.dumps(ref.model_dump(mode="json"), sort_keys=True))
            if key not in built:
                built[key] = build_chain(ref, kind, context)
            return built[key], key[1]

        by_source: dict[str, QueryChains] = {}
        groups: dict[tuple[str, str], SourceGroup] = {}
        for name in config.sources:
            refs = source_chain_refs(config, name)
            transform, t_key = chain(refs["query_transform"].ref, QueryTransform)
            reranker, r_key = chain(refs["reranker"].ref, Reranker)
            formatter, _ = chain(refs["formatter"].ref, Formatter)
            assert isinstance(transform, QueryTransform) and isinstance(reranker, Reranker)
            assert isinstance(formatter, Formatter)
            by_source[name] = QueryChains(transform, reranker, formatter)
            group = groups.setdefault(
                (t_key, r_key), SourceGroup([], transform, reranker, t_key, r_key)
            )
            group.sources.append(name)
        arbiter, _ = chain(config.query.reranker, Reranker)
        assert isinstance(arbiter, Reranker)
        return cls(
            by_source=by_source,
            groups=list(groups.values()),
            default_source=config.default_source,
            arbiter=arbiter,
        )


def _group_scopes(
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


async def search(
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
) -> Answer:
    """The query path, start to end: transform → embed → search → complete → rerank →
    top-N read; ``filters`` are payload conditions (checked).

    One group of sources (the usual case) is searched as one. Several: each group's
    transform puts the query in its sources' form, each group is searched and fused on
    its own, and the candidates are merged: with one reranker for all, it re-scores the
    union (the fusion reranker normalises every signal over all candidates, so sources
    compete on one scale); with different rerankers, see ``_rerank``."""
    started = time.perf_counter()
    stages = StageTimer()
    scopes = _group_scopes(plan.groups, plan.default_source, filters)
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
                results = (await _rerank(text, groups, read, plan.arbiter))[:top_n]
        else:  # ranked on signals: only the top-N are read
            unread = [[c.unread() for c in candidates] for candidates in found]
            with stages("rerank"):
                ranked = await _rerank(text, groups, unread, plan.arbiter)
            with stages("search"):
                results = await asyncio.to_thread(_read_kept, ranked, top_n, retrievers, found)
    took = round((time.perf_counter() - started) * 1000, 1)
    return Answer(
        query=text,
        variants=texts,
        results=results,
        warnings=warnings,
        took_ms=took,
        stage_ms=stages.milliseconds(),
    )


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


def _read_kept(
    ranked: list[SearchResult],
    top_n: int,
    retrievers: list[Retriever],
    found: list[list[Candidate]],
) -> list[SearchResult]:
    """The first ``top_n`` of ``ranked`` (candidates a reranker scored on their signals)
    read, each by the retriever that found it, with its reranked score and signals; a chunk
    deleted since the search gives its place to the next."""
    found_by = {c.chunk_id: (i, c) for i, group in enumerate(found) for c in group}
    kept: list[SearchResult] = []
    start = 0
    while len(kept) < top_n and start < len(ranked):
        batch = ranked[start : start + top_n - len(kept)]
        start += len(batch)
        read: dict[str, SearchResult] = {}
        for index, retriever in enumerate(retrievers):
            mine = [
                replace(found_by[r.chunk_id][1], score=r.score, signals=r.signals)
                for r in batch
                if found_by[r.chunk_id][0] == index
            ]
            if mine:
                read.update((r.chunk_id, r) for r in retriever.read(mine))
        kept += [read[r.chunk_id] for r in batch if r.chunk_id in read]
    return kept


def _group_k(top_k: int, top_n: int, groups: int) -> int:
    """Candidates per group: ``top_k`` shared among the groups (never fewer than
    ``top_n``), so a query over several groups completes and reranks as many candidates
    as one over a single group, and costs about as much."""
    return max(top_n, -(-top_k // max(1, groups)))


async def _none() -> list[list[float]]:
    return []


async def _rerank(
    text: str, groups: list[SourceGroup], found: list[list[SearchResult]], arbiter: Reranker
) -> list[SearchResult]:
    """One reranker for every group: it re-scores the union. Several: ``arbiter`` (the
    knowledge base's ``query.reranker``) ranks the union on one scale, which decides how
    many places of the ranking each group gets and where; each group's own reranker
    decides which of its candidates fill its places, in its order."""
    union = [r for results in found for r in results]
    every = [source for g in groups for source in g.sources]
    if len({g.reranker_ref for g in groups}) <= 1:
        return await for_sources(every, groups[0].reranker.run(text, union)) if groups else []
    slots, *own = await asyncio.gather(
        for_sources(every, arbiter.run(text, union)),
        *(
            for_sources(g.sources, g.reranker.run(text, results))
            for g, results in zip(groups, found, strict=True)
        ),
    )
    group_of = {r.chunk_id: index for index, results in enumerate(found) for r in results}
    queues = [iter(ranked) for ranked in own]
    merged = []
    for slot in slots:
        chosen = next(queues[group_of[slot.chunk_id]], None)
        if chosen is not None:
            merged.append(chosen.model_copy(update={"score": slot.score}))
    return merged


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
