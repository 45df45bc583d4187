"""Learned matching texts and unhelpful marks as stored points: their ids and payloads,
and how an ingest that writes a new version of a document carries them to it (the
``FeedbackKeeper`` of ``engine.feedback`` gives them; this module holds what the commit
needs, so the ingest path does not depend on the keeper)."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from flexmatch.engine.points import (
    CHUNK_FIELDS,
    CONTENT,
    FEEDBACK,
    LEARNED,
    MATCH,
    POINT_NAMESPACE,
    Filters,
    lexical_text,
)
from flexmatch.engine.stores import StoredPoint, VectorStore


def chunk_hash(text: str) -> str:
    """What says a chunk's text is unchanged."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def learned_point_id(tenant: str, chunk_id: str, version: str, text: str) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, json.dumps([tenant, chunk_id, version, LEARNED, text])))


def feedback_record_id(tenant: str, chunk_id: str) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, json.dumps([tenant, chunk_id, FEEDBACK])))


def learned_payload(carrier: dict[str, Any], text: str, learned: dict[str, Any]) -> dict[str, Any]:
    """A learned text's payload: its chunk's point fields (document, version, access,
    filterable metadata), not the chunk's own text, and what was learned."""
    payload = {
        k: v
        for k, v in carrier.items()
        if k not in CHUNK_FIELDS and k not in ("tenant", "matched_location")
    }
    payload.update(
        matched_text=text,
        match_kind=LEARNED,
        learned=learned,
        chunk_hash=chunk_hash(str(carrier.get("content", ""))),
    )
    return payload


# -- carried across versions (the ingest's commit) ------------------------------------------
def carried_learned(
    store: VectorStore, tenant: str, document_id: str, old_version: str, points: list[StoredPoint]
) -> list[StoredPoint]:
    """The learned texts of ``old_version`` whose chunk has the same text in the new
    version's ``points``, as points of the new version (their vectors reused)."""
    carriers = {str(p.payload["chunk_id"]): p.payload for p in points if "content" in p.payload}
    if not carriers:
        return []
    filters: Filters = {
        "record": MATCH,
        "document_id": document_id,
        "version": old_version,
        "match_kind": LEARNED,
    }
    carried = []
    for hit, vector in store.scroll_vectors(tenant, filters):
        carrier = carriers.get(str(hit.payload["chunk_id"]))
        if carrier is None or chunk_hash(str(carrier["content"])) != hit.payload.get("chunk_hash"):
            continue  # the chunk's text changed, or it is gone: what was learned is dropped
        text = str(hit.payload["matched_text"])
        point_id = learned_point_id(tenant, str(carrier["chunk_id"]), str(carrier["version"]), text)
        learned = {**hit.payload["learned"], "id": point_id}
        payload = learned_payload(carrier, text, learned)
        carried.append(StoredPoint(id=point_id, vector=vector, text=text, payload=payload))
    return carried


def with_learned_words(points: list[StoredPoint], carried: list[StoredPoint]) -> list[StoredPoint]:
    """The content points among a new version's ``points`` whose chunk ``carried``
    learned texts to, their BM25 text (``lexical_text``) holding those texts' words too."""
    added: dict[str, list[tuple[object, str]]] = {}
    for point in carried:
        added.setdefault(str(point.payload["chunk_id"]), []).append((LEARNED, point.text))
    return [
        point.model_copy(update={"text": lexical_text(point.text, added[chunk])})
        for point in points
        if point.payload.get("match_kind") == CONTENT
        and (chunk := str(point.payload.get("chunk_id"))) in added
    ]


def prune_unhelpful(
    store: VectorStore, tenant: str, document_id: str, points: list[StoredPoint]
) -> None:
    """Drop the unhelpful marks of a document's chunks whose text changed or are gone
    (after a new version is committed)."""
    texts = {
        str(p.payload["chunk_id"]): chunk_hash(str(p.payload["content"]))
        for p in points
        if "content" in p.payload
    }
    records = store.scroll(tenant, {"record": FEEDBACK, "document_id": document_id})
    stale = [
        str(r.payload["chunk_id"])
        for r in records
        if texts.get(str(r.payload["chunk_id"])) != r.payload.get("chunk_hash")
    ]
    if stale:
        store.delete(tenant, {"record": FEEDBACK, "chunk_id": stale})


# -- their words in the chunk's BM25 text ----------------------------------------------------
def relexicalise(store: VectorStore, tenant: str, chunk_id: str, version: str) -> None:
    """Write a chunk's content point again with the BM25 text ``lexical_text`` makes of
    the chunk's query-like matching texts as they are now: a learned text's words find
    its chunk as a question's do, and leave with it."""
    filters: Filters = {"record": MATCH, "chunk_id": chunk_id, "version": version}
    points = store.scroll_vectors(tenant, filters)
    content = next(((h, v) for h, v in points if h.payload.get("match_kind") == CONTENT), None)
    if content is None:
        return
    hit, vector = content
    texts = [
        (h.payload.get("match_kind"), str(h.payload.get("matched_text", ""))) for h, _ in points
    ]
    payload = {k: v for k, v in hit.payload.items() if k != "tenant"}
    text = lexical_text(str(payload.get("matched_text", "")), texts)
    store.upsert(tenant, [StoredPoint(id=hit.id, vector=vector, text=text, payload=payload)])
