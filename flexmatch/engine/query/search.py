"""First-stage retrieval: dense and lexical search over matching texts, collapsed to chunks,
fused, and completed with every signal the reranker and ``--explain`` use (a
``Candidate``); ``Retriever.read`` makes the candidates kept ``SearchResult``s."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flexmatch.config import QueryConfig
from flexmatch.engine import fusion
from flexmatch.engine.documents import DocumentRegistry, record_id
from flexmatch.engine.points import (
    CONTENT,
    QUESTION_KINDS,
    RANKING_FIELDS,
    Filters,
    MatchPayload,
    match_point_id,
)
from flexmatch.engine.stores import Hit, Search, VectorStore
from flexmatch.models import SearchResult, Signals

# the two halves of a dense signal, as filter values
KINDS: dict[str, list[str]] = {CONTENT: [CONTENT], "question": list(QUESTION_KINDS)}
VERSIONED = ("chunk_id", "version")  # what tells whose a hit is


@dataclass(frozen=True)
class Candidate:
    """A chunk the first stage found, with every signal: what ranking needs. ``carrier``
    and ``best_match`` are the point ids its text and best matching text are read from
    (``Retriever.read``), so it can be read whenever a caller keeps it."""

    chunk_id: str
    document_id: str
    score: float
    signals: Signals
    carrier: str
    best_match: str | None

    def unread(self) -> SearchResult:
        """The candidate as a reranker that ranks on signals alone sees it
        (``Reranker.reads_content`` false): ids, score and signals, no text yet."""
        return SearchResult(
            chunk_id=self.chunk_id,
            document_id=self.document_id,
            uri="",
            source="",
            title="",
            heading_path=[],
            content="",
            qualifying_text="",
            matched_text="",
            score=self.score,
            signals=self.signals,
        )


@dataclass
class _FirstStage:
    """What the first stage found, for ``Retriever._complete``: the chunks chosen (best
    first), their best hits, fused scores, and the dense and BM25 hits per chunk."""

    chosen: list[str]
    best: dict[str, Hit]
    fused: fusion.Scores
    dense: dict[str, Hit]
    lexical: dict[str, Hit]
    lexical_request: Search
    scoped: Filters


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
        for hits in found[: len(vectors)] if mode != "lexical" else []:
            _best_per_chunk(hits, dense)
        lexical = _best_per_chunk(found[-1]) if mode != "dense" else {}
        fused = self._fuse(
            {k: b.score for k, b in dense.items()}, {k: b.score for k, b in lexical.items()}
        )
        chosen = fusion.ranking(fused)[:top_k]
        best = {key: dense.get(key) or lexical[key] for key in chosen}
        stage = _FirstStage(chosen, best, fused, dense, lexical, lexical_request, scoped)
        candidates = self._complete(stage, vectors)
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
        is gone (deleted since the search) is left out."""
        carriers = {c.carrier: c.chunk_id for c in candidates}
        wanted = {c.best_match: c.chunk_id for c in candidates if c.best_match}
        records = {record_id(self.tenant, c.document_id): c.document_id for c in candidates}
        chunks: dict[str, MatchPayload] = {}
        texts: dict[str, str] = {}
        metadata: dict[str, dict[str, Any]] = {}
        for hit in self.store.retrieve(self.tenant, list({**carriers, **wanted, **records})):
            if hit.id in carriers:
                chunks[carriers[hit.id]] = MatchPayload.model_validate(hit.payload)
            if hit.id in wanted:
                texts[wanted[hit.id]] = str(hit.payload.get("matched_text", ""))
            if hit.id in records and isinstance(hit.payload.get("metadata"), dict):
                metadata[records[hit.id]] = hit.payload["metadata"]
        results = []
        for c in candidates:
            if c.chunk_id not in chunks:
                continue
            result = chunks[c.chunk_id].result(c.score)
            result.matched_text = texts.get(c.chunk_id, result.matched_text)
            result.metadata = metadata.get(c.document_id, result.metadata)
            result.signals = c.signals
            results.append(result)
        return results

    def _contents_one_by_one(
        self, vector: list[float], keys: list[str], found_with: dict[str, str], scope: Filters
    ) -> list[Hit]:
        """Each chunk's own content point, one search each (rarely needed: see
        ``_complete``)."""
        searches = [
            Search(
                1,
                vector=vector,
                filters={**scope, "chunk_id": key, "version": found_with[key]},
                fields=VERSIONED,
            )
            for key in keys
        ]
        return [hit for hits in self.store.search_batch(self.tenant, searches) for hit in hits]

    def _complete(self, stage: _FirstStage, vectors: list[list[float]]) -> list[Candidate]:
        """Every candidate gets every signal, not just those of the lists it came from.

        One batch. A chunk has one content point per version, so per variant *one*
        search among the content points of every candidate missing that signal finds
        them all (only the version each candidate was found with counts). Its best
        question match is the best of several points, so each candidate missing it gets
        a one-hit search without payload (the search's position says whose it is), its
        version in the filter."""
        chosen, best, fused, dense, lexical = (
            stage.chosen,
            stage.best,
            stage.fused,
            stage.dense,
            stage.lexical,
        )
        scoped, lexical_request = stage.scoped, stage.lexical_request
        if not chosen:
            return []
        # a candidate's best dense match over every variant is already known from the
        # first stage; it is the best of its kind too, so only the other kind is searched
        known = {
            key: CONTENT if dense[key].payload.get("match_kind") == CONTENT else "question"
            for key in chosen
            if key in dense
        }
        found_with = {key: str(best[key].payload["version"]) for key in chosen}
        no_content = [key for key in chosen if known.get(key) != CONTENT]
        no_question = [key for key in chosen if known.get(key) != "question"]
        # (the version is checked on the hits: as a condition it costs more than it saves)
        contents: Filters = {**scoped, "match_kind": KINDS[CONTENT], "chunk_id": no_content}
        room = content_room(len(no_content))
        per_variant = bool(no_content) + len(no_question)
        searches: list[Search] = []
        for vector in vectors:
            if no_content:
                searches.append(Search(room, vector=vector, filters=contents, fields=VERSIONED))
            for key in no_question:
                own: Filters = {**scoped, "chunk_id": key, "version": found_with[key]}
                own["match_kind"] = KINDS["question"]
                searches.append(Search(1, vector=vector, filters=own, fields=()))
        no_bm25 = [key for key in chosen if key not in lexical]
        if no_bm25:
            within = {**(lexical_request.filters or {}), "chunk_id": no_bm25}
            searches.append(replace(lexical_request, limit=2 * len(no_bm25), filters=within))
        found = self.store.search_batch(self.tenant, searches)
        best_of: dict[str, dict[str, Hit]] = {CONTENT: {}, "question": {}}
        for key, kind in known.items():
            best_of[kind][key] = dense[key]

        def keep(into: dict[str, Hit], key: str, hit: Hit) -> None:
            if key not in into or into[key].score < hit.score:
                into[key] = hit

        for variant, vector in enumerate(vectors):
            batch = found[variant * per_variant : (variant + 1) * per_variant]
            if no_content:
                hits, batch = batch[0], batch[1:]
                if len(hits) == room:  # crowded out: ask for each chunk's own
                    hits = self._contents_one_by_one(vector, no_content, found_with, contents)
                for hit in hits:
                    key = str(hit.payload["chunk_id"])
                    if hit.payload["version"] == found_with.get(key):
                        keep(best_of[CONTENT], key, hit)
            for key, hits in zip(no_question, batch, strict=True):
                if hits:
                    keep(best_of["question"], key, hits[0])
        content, question = best_of[CONTENT], best_of["question"]
        bm25 = dict(lexical)
        if no_bm25:
            # only the version each candidate was found with counts (a newer one may have
            # been written since)
            _best_per_chunk(
                [h for h in found[-1] if h.payload["version"] == found_with[h.payload["chunk_id"]]],
                bm25,
            )
        top = {
            key: max(pair, key=lambda h: h.score)
            for key in chosen
            if (pair := [h for h in (content.get(key), question.get(key)) if h is not None])
        }
        dense_ranks = _ranks(dense)
        lexical_ranks = _ranks(lexical)
        return [
            Candidate(
                chunk_id=key,
                document_id=str(best[key].payload["document_id"]),
                score=fused[key],
                signals=Signals(
                    dense=top[key].score if key in top else None,
                    dense_rank=dense_ranks.get(key),
                    question=question[key].score if key in question else None,
                    content=content[key].score if key in content else None,
                    lexical=bm25[key].score if key in bm25 else 0.0,
                    lexical_rank=lexical_ranks.get(key),
                    first_stage=fused[key],
                ),
                carrier=match_point_id(self.tenant, key, str(best[key].payload["version"]), 0),
                best_match=top[key].id if key in top else None,
            )
            for key in chosen
        ]


def content_room(chunks: int) -> int:
    """Hits the one content search asks for: room for a second version of each chunk (a
    write in flight); an answer that fills it is redone chunk by chunk."""
    return 2 * chunks + 8


def _ranks(best: dict[str, Hit]) -> dict[str, int]:
    order = fusion.ranking({key: b.score for key, b in best.items()})
    return {key: rank for rank, key in enumerate(order, start=1)}
