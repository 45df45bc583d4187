"""Complete: every candidate the first stage found gets every signal (dense, question,
content, BM25 and their ranks), not only those of the lists it came from, in one batch
of searches; the result is a typed ``Candidate``, which ``search.Retriever.read`` reads
into a ``SearchResult`` once a caller keeps it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from flexmatch.engine import fusion
from flexmatch.engine.points import (
    CONTENT,
    QUERY_LIKE_KINDS,
    QUESTION_KINDS,
    Filters,
    calibrated,
    match_point_id,
)
from flexmatch.engine.stores import Hit, Search, VectorStore
from flexmatch.models import SearchResult, Signals

# the two halves of a dense signal, as filter values; the question half is searched in
# two parts, its query-like kinds apart, since their scores are calibrated (``calibrated``)
KINDS: dict[str, list[str]] = {CONTENT: [CONTENT], "question": list(QUESTION_KINDS)}
PARTS: tuple[list[str], ...] = (
    [kind for kind in QUESTION_KINDS if kind not in QUERY_LIKE_KINDS],
    list(QUERY_LIKE_KINDS),
)
VERSIONED = ("chunk_id", "version")  # what tells whose a hit is


@dataclass(frozen=True)
class Candidate:
    """A chunk the first stage found, with every signal: what ranking needs. ``carrier``
    and ``best_match`` are the point ids its text and best matching text are read from
    (``Retriever.read``), so it can be read whenever a caller keeps it; ``best_question``
    is its best text of the question kinds (a sentence, a keyword), which says where in
    the chunk the query matched when its best match is the whole chunk."""

    chunk_id: str
    document_id: str
    score: float
    signals: Signals
    carrier: str
    best_match: str | None
    best_question: str | None = None

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
class FirstStage:
    """What the first stage found, for ``complete``: the chunks chosen (best
    first), their best hits, fused scores, and the dense and BM25 hits per chunk."""

    chosen: list[str]
    best: dict[str, Hit]
    fused: fusion.Scores
    dense: dict[str, Hit]
    lexical: dict[str, Hit]
    lexical_request: Search
    scoped: Filters
    # per chunk, its best hit of each part (``_part``) the dense searches found (``seen``)
    parts: dict[str, dict[str | int, Hit]] = field(default_factory=dict)


def calibrate(hits: list[Hit]) -> list[Hit]:
    """Dense hits with their scores on the scale every kind shares (``calibrated``: a
    query-like text's cosine lowered), best first; the same hits when none is query-like."""
    if not any(hit.payload.get("match_kind") in QUERY_LIKE_KINDS for hit in hits):
        return hits
    moved = [Hit(h.id, h.payload, calibrated(h.score, h.payload.get("match_kind"))) for h in hits]
    return sorted(moved, key=lambda h: -h.score)


def allowed(scoped: Filters, kinds: list[str]) -> list[str]:
    """The match kinds among ``kinds`` that a caller's ``match_kind`` filter lets
    through: a kind filtered out gives no signal, in the first stage or here, so a
    reranker cannot bring it back."""
    wanted = scoped.get("match_kind")
    if wanted is None:
        return kinds
    let = {str(wanted)} if isinstance(wanted, str | int | bool) else {str(k) for k in wanted}
    return [kind for kind in kinds if kind in let]


def best_per_chunk(hits: list[Hit], into: dict[str, Hit] | None = None) -> dict[str, Hit]:
    """Each chunk's best hit among ``hits`` (added to ``into``)."""
    best = into if into is not None else {}
    for hit in hits:
        chunk_id = str(hit.payload["chunk_id"])
        if chunk_id not in best or best[chunk_id].score < hit.score:
            best[chunk_id] = hit
    return best


def complete(
    store: VectorStore, tenant: str, stage: FirstStage, vectors: list[list[float]]
) -> list[Candidate]:
    """Every candidate gets every signal, not just those of the lists it came from.

    One batch. A chunk has one content point per version, so per variant *one*
    search among the content points of every candidate missing that signal finds
    them all (only the version each candidate was found with counts). Its best
    question match is the best of several points, so each candidate missing it gets
    a one-hit search (the search's position says whose it is), its version in the
    filter; a second batch only where that best is a question (calibrated lower, so the
    chunk's best sentence is needed too): never for an index without questions."""
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
    # what the first stage's dense hits already say: a chunk's best hit of a part (the
    # content, its sentences, its questions) wherever one of that part was among them
    # (within a part the store's order is the calibrated order). A sentence found there
    # also settles the questions: any question of that chunk left out scored below it
    # raw, so lower still calibrated; the other way round a sentence may still beat it
    found_with = {key: str(best[key].payload["version"]) for key in chosen}
    known = {
        key: {
            part: hit
            for part, hit in stage.parts.get(key, {}).items()
            if str(hit.payload.get("version")) == found_with[key]
        }
        for key in chosen
    }
    content_kinds, sentence_kinds = allowed(scoped, KINDS[CONTENT]), allowed(scoped, PARTS[0])
    no_content = [key for key in chosen if CONTENT not in known[key]] if content_kinds else []
    # the question half: where none of it is known, one search over all of it (its best
    # a sentence: settled; a question: the chunk's sentences are searched next, in a
    # second batch, since one may still beat it); where a question is known, only the
    # sentences. An index without questions so costs no search more than before.
    missing: list[tuple[str, int | None]] = [
        (key, 0 if 1 in known[key] else None) for key in chosen if 0 not in known[key]
    ]
    missing = [(key, part) for key, part in missing if allowed(scoped, _kinds_of(part))]
    # (the version is checked on the hits: as a condition it costs more than it saves)
    contents: Filters = {**scoped, "match_kind": content_kinds, "chunk_id": no_content}
    room = content_room(len(no_content))
    per_variant = bool(no_content) + len(missing)
    searches: list[Search] = []
    for vector in vectors:
        if no_content:
            searches.append(Search(room, vector=vector, filters=contents, fields=VERSIONED))
        for key, part in missing:
            own: Filters = {**scoped, "chunk_id": key, "version": found_with[key]}
            own["match_kind"] = allowed(scoped, _kinds_of(part))
            fields = ("match_kind",) if part is None else ()
            searches.append(Search(1, vector=vector, filters=own, fields=fields))
    no_bm25 = [key for key in chosen if key not in lexical]
    if no_bm25:
        within = {**(lexical_request.filters or {}), "chunk_id": no_bm25}
        searches.append(replace(lexical_request, limit=2 * len(no_bm25), filters=within))
    found = store.search_batch(tenant, searches)
    best_of: dict[str, dict[str, Hit]] = {CONTENT: {}, "question": {}}

    def keep(into: dict[str, Hit], key: str, hit: Hit) -> None:
        if key not in into or into[key].score < hit.score:
            into[key] = hit

    for key, parts in known.items():
        for which, hit in parts.items():
            keep(best_of[CONTENT if which == CONTENT else "question"], key, hit)

    again: list[tuple[int, str]] = []  # (variant, chunk) whose sentences are searched next
    for variant, vector in enumerate(vectors):
        batch = found[variant * per_variant : (variant + 1) * per_variant]
        if no_content:
            hits, batch = batch[0], batch[1:]
            if len(hits) == room:  # crowded out: ask for each chunk's own
                hits = _contents_one_by_one(store, tenant, vector, no_content, found_with, contents)
            for hit in hits:
                key = str(hit.payload["chunk_id"])
                if hit.payload["version"] == found_with.get(key):
                    keep(best_of[CONTENT], key, hit)
        for (key, part), hits in zip(missing, batch, strict=True):
            if hits:
                hit = hits[0]  # a part's found without payload: its kind is the part's
                kind = hit.payload.get("match_kind") if part is None else PARTS[part][0]
                keep(best_of["question"], key, Hit(hit.id, {}, calibrated(hit.score, kind)))
                if part is None and kind in QUERY_LIKE_KINDS and sentence_kinds:
                    again.append((variant, key))
    if again:
        sentences = [
            Search(
                1,
                vector=vectors[variant],
                filters={
                    **scoped,
                    "chunk_id": key,
                    "version": found_with[key],
                    "match_kind": sentence_kinds,
                },
                fields=(),
            )
            for variant, key in again
        ]
        for (_, key), hits in zip(again, store.search_batch(tenant, sentences), strict=True):
            if hits:
                keep(best_of["question"], key, Hit(hits[0].id, {}, hits[0].score))
    content, question = best_of[CONTENT], best_of["question"]
    bm25 = dict(lexical)
    if no_bm25:
        # only the version each candidate was found with counts (a newer one may have
        # been written since)
        best_per_chunk(
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
            carrier=match_point_id(tenant, key, str(best[key].payload["version"]), 0),
            best_match=top[key].id if key in top else None,
            best_question=question[key].id if key in question else None,
        )
        for key in chosen
    ]


def seen(variants: list[list[Hit]]) -> dict[str, dict[str | int, Hit]]:
    """Per chunk, its best (calibrated) hit of each part found in *every* variant's dense
    hits, the best over the variants: only then is it that part's best for the query."""
    tables: list[dict[str, dict[str | int, Hit]]] = []
    for hits in variants:
        table: dict[str, dict[str | int, Hit]] = {}
        for hit in hits:
            parts = table.setdefault(str(hit.payload["chunk_id"]), {})
            part = _part(hit.payload.get("match_kind"))
            if part not in parts or parts[part].score < hit.score:
                parts[part] = hit
        tables.append(table)
    out: dict[str, dict[str | int, Hit]] = {}
    for key in tables[0] if tables else {}:
        common = set.intersection(*(set(t.get(key, {})) for t in tables))
        if common:
            out[key] = {p: max((t[key][p] for t in tables), key=lambda h: h.score) for p in common}
    return out


def _part(kind: object) -> str | int:
    """Which part of the dense signal a hit's kind is: ``CONTENT``, or the index in
    ``PARTS`` of the question half's part."""
    if kind == CONTENT:
        return CONTENT
    return 1 if kind in QUERY_LIKE_KINDS else 0


def _contents_one_by_one(
    store: VectorStore,
    tenant: str,
    vector: list[float],
    keys: list[str],
    found_with: dict[str, str],
    scope: Filters,
) -> list[Hit]:
    """Each chunk's own content point, one search each (rarely needed: see
    ``complete``)."""
    searches = [
        Search(
            1,
            vector=vector,
            filters={**scope, "chunk_id": key, "version": found_with[key]},
            fields=VERSIONED,
        )
        for key in keys
    ]
    return [hit for hits in store.search_batch(tenant, searches) for hit in hits]


def content_room(chunks: int) -> int:
    """Hits the one content search asks for: room for a second version of each chunk (a
    write in flight); an answer that fills it is redone chunk by chunk."""
    return 2 * chunks + 8


def _ranks(best: dict[str, Hit]) -> dict[str, int]:
    order = fusion.ranking({key: b.score for key, b in best.items()})
    return {key: rank for rank, key in enumerate(order, start=1)}


def _kinds_of(part: int | None) -> list[str]:
    """The match kinds a completion search of ``part`` covers (None: the whole question
    half)."""
    return KINDS["question"] if part is None else PARTS[part]
