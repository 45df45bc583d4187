"""First-stage retrieval: dense and lexical search over matching texts, collapsed to chunks,
fused, and completed with every signal the reranker and ``--explain`` use."""

from __future__ import annotations

from dataclasses import replace

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

KINDS = {CONTENT: [CONTENT], "question": QUESTION_KINDS}  # the two halves of a dense signal


def _best_per_chunk(hits: list[Hit], into: dict[str, Hit] | None = None) -> dict[str, Hit]:
    best = into if into is not None else {}
    for hit in hits:
        chunk_id = str(hit.payload["chunk_id"])
        if chunk_id not in best or best[chunk_id].score < hit.score:
            best[chunk_id] = hit
    return best


class Retriever:
    """Runs the first stage for one query against one tenant, in few round trips: the
    BM25 search (``lexical_search``, which needs no vectors, so it runs while the query is
    embedded), one batch of dense searches (every variant), one look-up of the documents'
    committed versions, one batch completing the candidates' signals, one read of their
    chunks."""

    def __init__(
        self,
        store: VectorStore,
        tenant: str,
        settings: QueryConfig,
        exclude: Filters | None = None,
    ) -> None:
        """``exclude``: points the first stage leaves out (e.g. the sources another group
        of sources searches)."""
        self.store = store
        self.tenant = tenant
        self.settings = settings
        self.exclude = exclude
        self.registry = DocumentRegistry(store)
        self.versions: dict[str, str] = {}

    def _visible_batch(self, searches: list[Search], found: list[list[Hit]]) -> list[list[Hit]]:
        """Each search's hits (``found``) of committed versions only. While a write is in
        flight, points of versions readers must not see can take places in a top-K, so a
        search that lost some asks once more for as many as were hidden."""
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

    def _lexical(self, texts: list[str], top_k: int, filters: Filters | None) -> Search:
        contents = {**(filters or {}), "record": MATCH, "match_kind": CONTENT}
        return Search(
            top_k,
            text=" ".join(dict.fromkeys(texts)),
            filters=contents,
            fields=RANKING_FIELDS,
            exclude=self.exclude,
        )

    def lexical_search(self, texts: list[str], top_k: int, filters: Filters | None) -> list[Hit]:
        """The first stage's BM25 search (nothing in dense-only retrieval)."""
        if self.settings.retrieval == "dense":
            return []
        return self.store.search_batch(self.tenant, [self._lexical(texts, top_k, filters)])[0]

    def retrieve(
        self,
        texts: list[str],
        vectors: list[list[float]],
        top_k: int,
        filters: Filters | None,
        lexical_hits: list[Hit] | None = None,
    ) -> list[SearchResult]:
        """``lexical_hits``: what ``lexical_search`` found, when it ran meanwhile."""
        scoped = {**(filters or {}), "record": MATCH}
        mode = self.settings.retrieval
        lexical_request = self._lexical(texts, top_k, filters)
        searches: list[Search] = []
        if mode in ("dense", "hybrid"):
            searches += [
                Search(top_k, vector=v, filters=scoped, fields=RANKING_FIELDS, exclude=self.exclude)
                for v in vectors
            ]
        found = self.store.search_batch(self.tenant, searches) if searches else []
        if mode in ("lexical", "hybrid"):
            searches.append(lexical_request)
            if lexical_hits is None:
                lexical_hits = self.lexical_search(texts, top_k, filters)
            found.append(lexical_hits)
        found = self._visible_batch(searches, found)
        dense: dict[str, Hit] = {}
        for hits in found[: len(vectors)] if mode != "lexical" else []:
            _best_per_chunk(hits, dense)
        lexical = _best_per_chunk(found[-1]) if mode != "dense" else {}
        fused = self._fuse(
            {k: b.score for k, b in dense.items()}, {k: b.score for k, b in lexical.items()}
        )
        chosen = fusion.ranking(fused)[:top_k]
        best = {key: dense.get(key) or lexical[key] for key in chosen}
        results = self._complete(
            chosen,
            best,
            fused,
            vectors,
            lexical_request,
            scoped,
            dense,
            lexical,
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

    def _read(
        self, best: dict[str, Hit], matches: dict[str, Hit]
    ) -> tuple[dict[str, MatchPayload], dict[str, str]]:
        """The chunks, from their carrier points, and the text of each one's best match,
        in one look-up (a chunk whose carrier is gone, deleted since the search, is left
        out)."""
        carriers = {
            match_point_id(self.tenant, key, str(b.payload["version"]), 0): key
            for key, b in best.items()
        }
        wanted = {hit.id: key for key, hit in matches.items()}
        chunks: dict[str, MatchPayload] = {}
        texts: dict[str, str] = {}
        for hit in self.store.retrieve(self.tenant, list({**carriers, **wanted})):
            if hit.id in carriers:
                chunks[carriers[hit.id]] = MatchPayload.model_validate(hit.payload)
            if hit.id in wanted:
                texts[wanted[hit.id]] = str(hit.payload.get("matched_text", ""))
        return chunks, texts

    def _complete(
        self,
        chosen: list[str],
        best: dict[str, Hit],
        fused: fusion.Scores,
        vectors: list[list[float]],
        lexical_request: Search,
        scoped: Filters,
        dense: dict[str, Hit],
        lexical: dict[str, Hit],
    ) -> list[SearchResult]:
        """Every candidate gets every signal, not just those of the lists it came from.

        One batch: for each candidate and variant, its best content match and its best
        question match, each a one-hit search without payload (reading a payload costs
        more than the search; the search's position says whose it is). The version in the
        filter is the committed one the candidate was found with."""
        if not chosen:
            return []
        # a candidate's best dense match over every variant is already known from the
        # first stage; it is the best of its kind too, so only the other kind is searched
        known = {
            key: CONTENT if dense[key].payload.get("match_kind") == CONTENT else "question"
            for key in chosen
            if key in dense
        }
        wanted = [(key, kind) for key in chosen for kind in KINDS if known.get(key) != kind]
        searches: list[Search] = []
        for vector in vectors:
            for key, kind in wanted:
                own = {**scoped, "chunk_id": key, "version": str(best[key].payload["version"])}
                own["match_kind"] = KINDS[kind]
                searches.append(Search(1, vector=vector, filters=own, fields=()))
        needs_bm25 = not all(key in lexical for key in chosen)
        if needs_bm25:
            within = {**(lexical_request.filters or {}), "chunk_id": chosen}
            searches.append(replace(lexical_request, limit=len(chosen), filters=within))
        found = self.store.search_batch(self.tenant, searches)
        best_of: dict[str, dict[str, Hit]] = {CONTENT: {}, "question": {}}
        for key, kind in known.items():
            best_of[kind][key] = dense[key]
        for position, hits in enumerate(found[: len(vectors) * len(wanted)]):
            key, kind = wanted[position % len(wanted)]
            into = best_of[kind]
            if hits and (key not in into or into[key].score < hits[0].score):
                into[key] = hits[0]
        content, question = best_of[CONTENT], best_of["question"]
        bm25 = lexical
        if needs_bm25:
            bm25 = _best_per_chunk([h for h in found[-1] if is_committed(h, self.versions)])
        top = {
            key: max(pair, key=lambda h: h.score)
            for key in chosen
            if (pair := [h for h in (content.get(key), question.get(key)) if h is not None])
        }
        chunks, matched_texts = self._read(best, top)
        dense_ranks = _ranks(dense)
        lexical_ranks = _ranks(lexical)
        results = []
        for key in (key for key in chosen if key in chunks):
            r = chunks[key].result(fused[key])
            r.matched_text = matched_texts.get(key, r.matched_text)
            r.signals = Signals(
                dense=top[key].score if key in top else None,
                dense_rank=dense_ranks.get(key),
                question=question[key].score if key in question else None,
                content=content[key].score if key in content else None,
                lexical=bm25[key].score if key in bm25 else 0.0,
                lexical_rank=lexical_ranks.get(key),
                first_stage=r.score,
            )
            results.append(r)
        return results


def _ranks(best: dict[str, Hit]) -> dict[str, int]:
    order = fusion.ranking({key: b.score for key, b in best.items()})
    return {key: rank for rank, key in enumerate(order, start=1)}
