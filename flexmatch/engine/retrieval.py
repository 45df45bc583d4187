"""First-stage retrieval: dense and lexical search over matching texts, collapsed to chunks,
fused, and completed with every signal the reranker and ``--explain`` use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flexmatch.config import QueryConfig
from flexmatch.engine import fusion
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.points import CONTENT, MATCH, QUESTION_KINDS, Filters, MatchPayload
from flexmatch.engine.stores import Hit, VectorStore
from flexmatch.models import SearchResult, Signals


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
    """Runs the first stage for one query against one tenant."""

    def __init__(self, store: VectorStore, tenant: str, settings: QueryConfig) -> None:
        self.store = store
        self.tenant = tenant
        self.settings = settings
        self.registry = DocumentRegistry(store)

    def _visible(self, hits: list[Hit]) -> list[Hit]:
        return self.registry.visible(self.tenant, hits)

    def _visible_top(self, search: Callable[[int], list[Hit]], top_k: int) -> list[Hit]:
        """Top-K visible hits: while a write is in flight, points of versions readers must
        not see can take places in the top-K, so ask once more for as many as were hidden."""
        hits = search(top_k)
        visible = self._visible(hits)
        hidden = len(hits) - len(visible)
        if hidden and len(hits) == top_k:
            visible = self._visible(search(top_k + hidden))[:top_k]
        return visible

    def retrieve(
        self, texts: list[str], vectors: list[list[float]], top_k: int, filters: Filters | None
    ) -> list[SearchResult]:
        scoped = {**(filters or {}), "record": MATCH}
        mode = self.settings.retrieval
        dense: dict[str, _Best] = {}
        if mode in ("dense", "hybrid"):
            for vector in vectors:
                found = self._visible_top(
                    lambda limit, v=vector: self.store.search(self.tenant, v, limit, scoped), top_k
                )
                _best_per_chunk(found, dense)
        lexical: dict[str, _Best] = {}
        if mode in ("lexical", "hybrid"):
            contents = {**scoped, "match_kind": CONTENT}
            query = " ".join(dict.fromkeys(texts))
            lexical = _best_per_chunk(
                self._visible_top(
                    lambda limit: self.store.search_lexical(self.tenant, query, limit, contents),
                    top_k,
                )
            )
        fused = self._fuse(
            {k: b.score for k, b in dense.items()}, {k: b.score for k, b in lexical.items()}
        )
        chosen = fusion.ranking(fused)[:top_k]
        results = [
            self._result(key, fused[key], dense.get(key), lexical.get(key)) for key in chosen
        ]
        self._complete_signals(results, vectors, texts, scoped, dense, lexical)
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

    @staticmethod
    def _result(key: str, score: float, dense: _Best | None, lexical: _Best | None) -> SearchResult:
        found = dense or lexical
        assert found is not None
        return MatchPayload.model_validate(found.payload).result(score)

    def _complete_signals(
        self,
        results: list[SearchResult],
        vectors: list[list[float]],
        texts: list[str],
        scoped: Filters,
        dense: dict[str, _Best],
        lexical: dict[str, _Best],
    ) -> None:
        """Every candidate gets every signal, not just those of the lists it came from."""
        if not results:
            return
        ids = [r.chunk_id for r in results]
        within = {**scoped, "chunk_id": ids}
        limit = len(ids)
        content: dict[str, _Best] = {}
        question: dict[str, _Best] = {}
        for vector in vectors:
            contents = {**within, "match_kind": CONTENT}
            questions = {**within, "match_kind": QUESTION_KINDS}
            _best_per_chunk(
                self._visible(self.store.search(self.tenant, vector, limit, contents)), content
            )
            _best_per_chunk(
                self._visible(self.store.search(self.tenant, vector, limit * 20, questions)),
                question,
            )
        bm25 = lexical
        if not all(key in lexical for key in ids):
            query = " ".join(dict.fromkeys(texts))
            found = self.store.search_lexical(
                self.tenant, query, limit, {**within, "match_kind": CONTENT}
            )
            bm25 = _best_per_chunk(self._visible(found))
        dense_ranks = _ranks(dense)
        lexical_ranks = _ranks(lexical)
        for r in results:
            key = r.chunk_id
            scores = [b.score for b in (content.get(key), question.get(key)) if b is not None]
            best_match = max(
                (b for b in (content.get(key), question.get(key)) if b is not None),
                key=lambda b: b.score,
                default=None,
            )
            if best_match is not None:
                r.matched_text = MatchPayload.model_validate(best_match.payload).matched_text
            r.signals = Signals(
                dense=max(scores) if scores else None,
                dense_rank=dense_ranks.get(key),
                question=question[key].score if key in question else None,
                content=content[key].score if key in content else None,
                lexical=bm25[key].score if key in bm25 else 0.0,
                lexical_rank=lexical_ranks.get(key),
                first_stage=r.score,
            )


def _ranks(best: dict[str, _Best]) -> dict[str, int]:
    order = fusion.ranking({key: b.score for key, b in best.items()})
    return {key: rank for rank, key in enumerate(order, start=1)}
