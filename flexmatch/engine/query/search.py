"""Search: the first stage, dense and lexical search over matching texts, collapsed to
chunks and fused, then completed (``complete``: candidates with every signal); ``read``
makes the candidates a caller keeps ``SearchResult``s."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flexmatch.config import QueryConfig
from flexmatch.engine import fusion
from flexmatch.engine.documents import DocumentRegistry, record_id
from flexmatch.engine.points import CONTENT, RANKING_FIELDS, Filters, MatchPayload
from flexmatch.engine.query.complete import (
    Candidate,
    FirstStage,
    best_per_chunk,
    calibrate,
    complete,
    seen,
)
from flexmatch.engine.stores import Hit, Search, VectorStore
from flexmatch.models import Location, SearchResult


class Retriever:
    """Runs the first stage for one query against one tenant, in few round trips: the
    BM25 search (``lexical_search``, which needs no vectors, so it runs while the query is
    embedded), one batch of dense searches (every variant), one indexed look-up of what
    is visible, one batch completing the candidates' signals, one read of their chunks
    (``read``: only of those a caller keeps, when ranking needs no text)."""

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

    def _visible_batch(self, searches: list[Search], found: list[list[Hit]]) -> list[list[Hit]]:
        """Each search's hits (``found``) of committed versions only. While a write is in
        flight, points of versions readers must not see can take places in a top-K, so a
        search that lost some asks once more for as many as were hidden (and is judged
        by what is visible after that second search)."""
        seen = self.registry.visibility(self.tenant)
        visible = [[h for h in hits if seen(h)] for hits in found]
        again = [
            i
            for i, (search, hits) in enumerate(zip(searches, found, strict=True))
            if len(hits) == search.limit and len(visible[i]) < len(hits)
        ]
        if again:
            wider = [replace(searches[i], limit=2 * searches[i].limit) for i in again]
            refound = self.store.search_batch(self.tenant, wider)
            seen = self.registry.visibility(self.tenant)
            for i, hits in zip(again, refound, strict=True):
                visible[i] = [h for h in hits if seen(h)][: searches[i].limit]
        return visible

    def _lexical(self, texts: list[str], top_k: int, filters: Filters | None) -> Search:
        contents = {**(filters or {}), "match_kind": CONTENT}
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
        """``search`` and ``read`` in one: every candidate read."""
        return self.read(self.search(texts, vectors, top_k, filters, lexical_hits))

    def search(
        self,
        texts: list[str],
        vectors: list[list[float]],
        top_k: int,
        filters: Filters | None,
        lexical_hits: list[Hit] | None = None,
    ) -> list[Candidate]:
        """The first stage's candidates, best first, each with every signal (nothing read
        yet: a reranker that ranks on signals alone then has 5 chunks read, not 50).
        ``lexical_hits``: what ``lexical_search`` found, when it ran meanwhile."""
        # no ``record`` condition: only match points have vectors, so only they are found
        scoped = dict(filters or {})
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
        variants = [calibrate(hits) for hits in found[: len(vectors)]] if mode != "lexical" else []
        for hits in variants:
            best_per_chunk(hits, dense)
        lexical = best_per_chunk(found[-1]) if mode != "dense" else {}
        fused = self._fuse(
            {k: b.score for k, b in dense.items()}, {k: b.score for k, b in lexical.items()}
        )
        chosen = fusion.ranking(fused)[:top_k]
        best = {key: dense.get(key) or lexical[key] for key in chosen}
        stage = FirstStage(
            chosen, best, fused, dense, lexical, lexical_request, scoped, seen(variants)
        )
        candidates = complete(self.store, self.tenant, stage, vectors)
        if self.settings.min_score is not None:
            floor = self.settings.min_score
            candidates = [c for c in candidates if (c.signals.dense or -1.0) >= floor]
        return candidates

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

    def read(self, candidates: list[Candidate]) -> list[SearchResult]:
        """The candidates as results: their chunks, matched texts and document metadata
        (stored once, on the document's record) read in one look-up; a chunk whose carrier
        is gone (deleted since the search) is left out.

        A result's ``matched_location`` (what it cites) is where its best matching text
        is, when that is narrower than the chunk; when the best match is the chunk's
        whole text, where its best sentence (or keyword) is: the part of a chunk over a
        page break the query matched best."""
        carriers = {c.carrier: c.chunk_id for c in candidates}
        wanted = {c.best_match: c.chunk_id for c in candidates if c.best_match}
        sentences = {c.best_question: c.chunk_id for c in candidates if c.best_question}
        records = {record_id(self.tenant, c.document_id): c.document_id for c in candidates}
        chunks: dict[str, MatchPayload] = {}
        texts: dict[str, str] = {}
        places: dict[str, Location] = {}  # where each best matching text is, when known
        sentence_places: dict[str, Location] = {}
        metadata: dict[str, dict[str, Any]] = {}
        looked_up = list({**carriers, **wanted, **sentences, **records})
        for hit in self.store.retrieve(self.tenant, looked_up):
            if hit.id in carriers:
                chunks[carriers[hit.id]] = MatchPayload.model_validate(hit.payload)
            place = hit.payload.get("matched_location")
            if hit.id in wanted:
                texts[wanted[hit.id]] = str(hit.payload.get("matched_text", ""))
                if place:
                    places[wanted[hit.id]] = Location.model_validate(place)
            if hit.id in sentences and place:
                sentence_places[sentences[hit.id]] = Location.model_validate(place)
            if hit.id in records and isinstance(hit.payload.get("metadata"), dict):
                metadata[records[hit.id]] = hit.payload["metadata"]
        results = []
        for c in candidates:
            if c.chunk_id not in chunks:
                continue
            result = chunks[c.chunk_id].result(c.score)
            if c.chunk_id in texts:
                result.matched_text = texts[c.chunk_id]
                result.matched_location = places.get(c.chunk_id)
            if result.matched_location is None:
                result.matched_location = sentence_places.get(c.chunk_id)
            result.metadata = metadata.get(c.document_id, result.metadata)
            result.signals = c.signals
            results.append(result)
        return results
