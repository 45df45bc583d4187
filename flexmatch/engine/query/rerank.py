"""Rerank: the candidates of every group ranked on one scale, then the top-N kept read."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from flexmatch.engine.chains import Reranker
from flexmatch.engine.chains.base import for_sources
from flexmatch.engine.chains.plan import SourceGroup
from flexmatch.engine.query.complete import Candidate
from flexmatch.engine.query.search import Retriever
from flexmatch.models import SearchResult


async def rerank(
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


def read_kept(
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
