"""First-stage retrieval: dense and lexical search over matching texts, collapsed to chunks,
fused, and completed with every signal the reranker and ``--explain`` use."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flexmatch.config import QueryConfig
from flexmatch.engine import fusion
from flexmatch.engine.documents import DocumentRegistry, is_committed
from flexmatch.engine.points import (
    CONTENT,
    MATCH,
    QUESTION_KINDS,
    RANKING_FIELDS,
    Filters,
    MatchPayload,
    match_point_id,
)
from flexmatch.engine.stores import Hit, Search, VectorStore
from flexmatch.models import SearchResult, Signals

RANKING = RANKING_FIELDS
MATCHED = (*RANKING_FIELDS, "matched_text", "match_kind")


@dataclass
class _Best:
    score: float
    payload: dict[str, Any]


def _best_per_chunk(hits: list[Hit], into: dict[str, _Best] | None = None) -> dict[str, _Best]:
    best = into if into is not None else {}
    for hit in hits:
        chunk_id = str(hit.payload["chunk_id"])
        if chunk_id not in best or best[chunk_id].score < hit.score:
            best[chunk_id] = _Best(hit.score, hit.payload)
    return best


class Retriever:
    """Runs the first stage for one query against one tenant, in few round trips: one
    batch of searches (every variant, dense and lexical), one look-up of the documents'
    committed versions, one batch completing the candidates' signals, one read of their
    chunks."""

    def __init__(self, store: VectorStore, tenant: str, settings: QueryConfig) -> None:
        self.store = store
        self.tenant = tenant
        self.settings = settings
        self.registry = DocumentRegistry(store)
        self.versions: dict[str, str] = {}

    def _visible_batch(self, searches: list[Search]) -> list[list[Hit]]:
        """Each search's hits of committed versions only. While a write is in flight,
        points of versions readers must not see can take places in a top-K, so a search
        that lost some asks once more for as many as were hidden."""
        found = self.store.search_batch(self.tenant, searches)
        self._learn_versions(found)
        visible = [[h for h in hits if is_committed(h, self.versions)] for hits in found]
        again = [
            i
            for i, (search, hits) in enumerate(zip(searches, found, strict=True))
            if len(hits) == search.limit and len(visible[i]) < len(hits)
        ]
        if again:
            wider = [replace(searches[i], limit=2 * searches[i].limit) for i in again]
            refound = self.store.search_batch(self.tenant, wider)
            self._learn_versions(refound)
            for i, hits in zip(again, refound, strict=True):
                kept = [h for h in hits if is_committed(h, self.versions)]
                visible[i] = kept[: searches[i].limit]
        return visible

    def _learn_versions(self, found: list[list[Hit]]) -> None:
        unknown = {str(h.payload["document_id"]) for hits in found for h in hits}
        unknown -= self.versions.keys()
        if unknown:
            self.versions.update(self.registry.committed_versions(self.tenant, list(unknown)))

    def retrieve(
        self, texts: list[str], vectors: list[list[float]], top_k: int, filters: Filters | None
    ) -> list[SearchResult]:
        scoped = {**(filters or {}), "record": MATCH}
        mode = self.settings.retrieval
        searches: list[Search] = []
        if mode in ("dense", "hybrid"):
            searches += [Search(top_k, vector=v, filters=scoped, fields=RANKING) for v in vectors]
        lexical_query = " ".join(dict.fromkeys(texts))
        contents = {**scoped, "match_kind": CONTENT}
        if mode in ("lexical", "hybrid"):
            searches.append(Search(top_k, text=lexical_query, filters=contents, fields=RANKING))
        found = self._visible_batch(searches)
        dense: dict[str, _Best] = {}
        for hits in found[: len(vectors)] if mode != "lexical" else []:
            _best_per_chunk(hits, dense)
        lexical = _best_per_chunk(found[-1]) if mode != "dense" else {}
        fused = self._fuse(
            {k: b.score for k, b in dense.items()}, {k: b.score for k, b in lexical.items()}
        )
        chosen = fusion.ranking(fused)[:top_k]
        best = {key: dense.get(key) or lexical[key] for key in chosen}
        results = self._complete(
            chosen, best, fused, vectors, lexical_query, scoped, dense, lexical
        )
        if self.settings.min_score is not None:
            floor = self.settings.min_score
            results = [r for r in results if (r.signals.dense or -1.0) >= floor]
        return results

    def _fuse(self, dense: fusion.Scores, lexical: fusion.Scores) -> fusion.Scores:
        s = self.settings
        lists = [scores for scores in (dense, lexical) if scores]
        if len(lists) < 2:
            return dict(lists[0]) if lists else {}
        if s.fusion == "rrf":
            return fusion.rrf(lists, k=s.rrf_k)
        if s.fusion == "dbsf":
            return fusion.dbsf(lists)
        return fusion.weighted(lists, [s.dense_weight, s.lexical_weight])

    def _chunks(self, best: dict[str, _Best]) -> dict[str, MatchPayload]:
        """The chunks themselves, read from their carrier points in one look-up (a chunk
        whose carrier is gone, deleted since the search, is left out)."""
        ids = {
            match_point_id(self.tenant, key, str(b.payload["version"]), 0): key
            for key, b in best.items()
        }
        hits = self.store.retrieve(self.tenant, list(ids))
        return {ids[h.id]: MatchPayload.model_validate(h.payload) for h in hits}

    def _complete(
        self,
        chosen: list[str],
        best: dict[str, _Best],
        fused: fusion.Scores,
        vectors: list[list[float]],
        lexical_query: str,
        scoped: Filters,
        dense: dict[str, _Best],
        lexical: dict[str, _Best],
    ) -> list[SearchResult]:
        """Every candidate gets every signal, not just those of the lists it came from:
        one batch of searches restricted to the candidates' chunks."""
        if not chosen:
            return []
        versions = sorted({str(b.payload["version"]) for b in best.values()})
        within = {**scoped, "chunk_id": chosen, "version": versions}
        contents = {**within, "match_kind": CONTENT}
        questions = {**within, "match_kind": QUESTION_KINDS}
        limit = len(chosen)
        searches: list[Search] = []
        for vector in vectors:
            searches.append(Search(limit, vector=vector, filters=contents, fields=MATCHED))
            searches.append(Search(limit * 20, vector=vector, filters=questions, fields=MATCHED))
        needs_bm25 = not all(key in lexical for key in chosen)
        if needs_bm25:
            searches.append(Search(limit, text=lexical_query, filters=contents, fields=RANKING))
        found = self.store.search_batch(self.tenant, searches)
        visible = [[h for h in hits if is_committed(h, self.versions)] for hits in found]
        content: dict[str, _Best] = {}
        question: dict[str, _Best] = {}
        for i in range(len(vectors)):
            _best_per_chunk(visible[2 * i], content)
            _best_per_chunk(visible[2 * i + 1], question)
        bm25 = _best_per_chunk(visible[-1]) if needs_bm25 else lexical
        chunks = self._chunks(best)
        dense_ranks = _ranks(dense)
        lexical_ranks = _ranks(lexical)
        results = []
        for key in (key for key in chosen if key in chunks):
            r = chunks[key].result(fused[key])
            matches = [b for b in (content.get(key), question.get(key)) if b is not None]
            top = max(matches, key=lambda b: b.score, default=None)
            if top is not None:
                r.matched_text = str(top.payload.get("matched_text", ""))
            r.signals = Signals(
                dense=top.score if top is not None else None,
                dense_rank=dense_ranks.get(key),
                question=question[key].score if key in question else None,
                content=content[key].score if key in content else None,
                lexical=bm25[key].score if key in bm25 else 0.0,
                lexical_rank=lexical_ranks.get(key),
                first_stage=r.score,
            )
            results.append(r)
        return results


def _ranks(best: dict[str, _Best]) -> dict[str, int]:
    order = fusion.ranking({key: b.score for key, b in best.items()})
    return {key: rank for rank, key in enumerate(order, start=1)}
