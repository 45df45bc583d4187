"""Learning from use: the one unit that keeps what feedback teaches, in the store itself.

A *helpful* mark makes its query a **learned** matching text of the chunk: a match point
of kind ``learned`` (a question kind for ranking), embedded once, with the chunk's
document, version and access, and who marked it when. Near-duplicates (cosine at least
``feedback.merge_similarity`` to a learned text of that chunk) merge into it: its count
grows, no new point. Past ``max_learned_per_chunk`` the least-marked (oldest first) gives
way. Learned texts are kept while their chunk's text is unchanged: an ingest that writes
a new version carries them to it (``carried_learned``) and leaves behind those of a
chunk whose text changed.

An *unhelpful* mark is kept on a vectorless feedback record of the chunk (the query, its
vector, who and when): a query whose vector is at least ``demote_similarity`` to one of
them sees the chunk moved down at most ``demote_places`` places (``demotions``).

The rules hold for every path (Python, HTTP, the client, MCP, the agent tool, the
console): a chunk the principal may not read answers as one that does not exist, the
tenant is the store's scope, and each principal may give ``per_minute`` marks a minute.
``listeners`` is the one place a feedback event is produced.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from flexmatch.access import ACCESS_FIELD, Principal, access_filter, principal_name
from flexmatch.config import FeedbackConfig
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.embedders import Embedder
from flexmatch.engine.learned import (
    chunk_hash,
    feedback_record_id,
    learned_payload,
    learned_point_id,
    relexicalise,
)
from flexmatch.engine.points import FEEDBACK, LEARNED, MATCH, Filters
from flexmatch.engine.stores import Hit, StoredPoint, VectorStore
from flexmatch.engine.writes import Writes
from flexmatch.errors import (
    ConfigError,
    DocumentNotFoundError,
    FeedbackRateError,
    WriteConflictError,
)
from flexmatch.models import FeedbackEvent, FeedbackReceipt
from flexmatch.tools import check_query

MAX_FEEDBACK_QUERY = 1000  # characters: a query kept as a matching text
MAX_MARKS = 20  # who/when kept per learned text or unhelpful query (the count goes on)
MAX_CHUNK_ID = 1000
ADMIN_LABEL = "admin"

Listener = Callable[[FeedbackEvent], None]


logger = logging.getLogger(__name__)


def who(principal: Principal | None) -> str:
    return ADMIN_LABEL if principal is None else principal.label()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _unit(vector: Sequence[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def _cosines(vector: np.ndarray, others: Sequence[Sequence[float]]) -> np.ndarray:
    if not others:
        return np.zeros(0, dtype=np.float32)
    matrix = np.stack([_unit(o) for o in others])
    return matrix @ vector


class RateLimit:
    """At most ``per_minute`` marks per (tenant, principal) in any 60 seconds, in this
    process (each server replica counts its own)."""

    def __init__(self) -> None:
        self._given: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()

    def take(self, tenant: str, label: str, per_minute: int) -> None:
        now = time.monotonic()
        with self._lock:
            given = self._given.setdefault((tenant, label), deque())
            while given and now - given[0] >= 60:
                given.popleft()
            if len(given) >= per_minute:
                wait = 60 - (now - given[0])
                raise FeedbackRateError(
                    f"{label} gave {per_minute} feedback marks in the last minute "
                    f"(feedback.per_minute); try again in {wait:.0f} s"
                )
            given.append(now)


class FeedbackKeeper:
    """The feedback of one open knowledge base (see the module's docstring)."""

    def __init__(
        self,
        store: Callable[[], VectorStore],
        embedder: Callable[[], Embedder],
        settings: Callable[[], FeedbackConfig],
        writes: Writes | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._settings = settings
        self.writes = writes or Writes()  # hears the tenant after a mark or a removal
        self.rate = RateLimit()
        self.listeners: list[Listener] = []
        self._writing = threading.Lock()  # one read-modify-write of a chunk's marks at a time

    @property
    def store(self) -> VectorStore:
        return self._store()

    # -- giving feedback -----------------------------------------------------------------
    def add(
        self,
        query: str,
        chunk_id: str,
        helpful: bool,
        tenant: str,
        principal: Principal | None,
    ) -> FeedbackReceipt:
        """Keep one mark (see the module's docstring); ``DocumentNotFoundError`` for a
        chunk ``principal`` may not read, the same words as for one that does not exist."""
        query = check_query(query, limit=MAX_FEEDBACK_QUERY).strip()
        if not isinstance(helpful, bool):
            raise ConfigError(f"helpful must be true or false, not {helpful!r}"[:200])
        carrier = self.readable_chunk(tenant, chunk_id, principal)
        settings = self._settings()
        label = who(principal)
        self.rate.take(tenant, label, settings.per_minute)
        vector = _unit(self._embedder().embed([query])[0])
        at = _now()
        with self._writing:
            try:
                if helpful:
                    self._check_unchanged(tenant, carrier)
                    receipt = self._learn(tenant, carrier, query, vector, label, at, settings)
                    self._settle(tenant, carrier, receipt)
                else:
                    receipt = self._demote(tenant, carrier, query, vector, label, at, settings)
            finally:  # the ranking changed (or may have, before a failure)
                self.writes.written(tenant)
        self._produced(
            FeedbackEvent(
                tenant=tenant,
                query=query,
                chunk_id=chunk_id,
                document_id=str(carrier["document_id"]),
                helpful=helpful,
                principal=principal_name(principal),
                at=at,
            )
        )
        return receipt

    def _produced(self, event: FeedbackEvent) -> None:
        """The one place a feedback event is produced: every listener hears it. The mark
        is kept by then, so a listener that fails (a query log's database down) is
        logged, never the caller's error, and the others still hear it."""
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:
                logger.exception("a feedback listener failed; the mark itself is kept")

    # -- against writers meanwhile: an ingest, a removal, an access change ----------------
    def _check_unchanged(self, tenant: str, carrier: dict[str, Any]) -> None:
        """Refuse a mark while its document is being indexed again: the ingest carries
        what was learned before it began, so a mark written meanwhile could be lost."""
        record = DocumentRegistry(self.store).get(tenant, str(carrier["document_id"]))
        if record is None or record.version != carrier["version"] or record.pending_version:
            raise WriteConflictError(_changing(carrier))

    def _settle(self, tenant: str, carrier: dict[str, Any], receipt: FeedbackReceipt) -> None:
        """After a helpful mark's writes, which copied the chunk's payload as it was read:
        an access change meanwhile is applied to them too (the change reaches every point
        of the document by filter, but only those that existed); a document removed or
        indexed again meanwhile leaves nothing of the mark behind, and the caller is told
        to give it again."""
        chunk = {"record": MATCH, "chunk_id": carrier["chunk_id"], "version": carrier["version"]}
        now = [h.payload for h in self.store.scroll(tenant, chunk)]
        current = next((p for p in now if "content" in p), None)
        if current is not None and current.get(ACCESS_FIELD) != carrier.get(ACCESS_FIELD):
            self.store.set_payload(tenant, chunk, {ACCESS_FIELD: current.get(ACCESS_FIELD)})
        record = DocumentRegistry(self.store).get(tenant, str(carrier["document_id"]))
        if record is None or record.version != carrier["version"]:
            self.store.delete(tenant, chunk)  # a version no reader sees any more: garbage
            raise WriteConflictError(_changing(carrier))
        if record.pending_version and not receipt.merged and receipt.learned_id:
            learned = self.store.retrieve(tenant, [receipt.learned_id])
            if learned:
                self._delete_one(tenant, learned[0])
            raise WriteConflictError(_changing(carrier))

    def readable_chunk(
        self, tenant: str, chunk_id: str, principal: Principal | None
    ) -> dict[str, Any]:
        """The carrier payload of ``chunk_id``'s committed version, if ``principal`` may
        read it; else the one answer a missing chunk gets."""
        missing = DocumentNotFoundError(f"no chunk '{str(chunk_id)[:200]}' in tenant '{tenant}'")
        if not isinstance(chunk_id, str) or not chunk_id or len(chunk_id) > MAX_CHUNK_ID:
            raise missing
        filters: Filters = {"record": MATCH, "chunk_id": chunk_id, **access_filter(principal)}
        hits = DocumentRegistry(self.store).visible(tenant, self.store.scroll(tenant, filters))
        carriers = [h.payload for h in hits if "content" in h.payload]
        if not carriers:
            raise missing
        return carriers[0]

    def _learned_of(self, tenant: str, carrier: dict[str, Any]) -> list[tuple[Hit, list[float]]]:
        filters = {
            "record": MATCH,
            "chunk_id": carrier["chunk_id"],
            "version": carrier["version"],
            "match_kind": LEARNED,
        }
        return self.store.scroll_vectors(tenant, filters)

    def _learn(
        self,
        tenant: str,
        carrier: dict[str, Any],
        query: str,
        vector: np.ndarray,
        label: str,
        at: str,
        settings: FeedbackConfig,
    ) -> FeedbackReceipt:
        chunk_id = str(carrier["chunk_id"])
        known = self._learned_of(tenant, carrier)
        similarity = _cosines(vector, [v for _, v in known])
        mark = {"who": label, "at": at}
        if len(similarity) and float(similarity.max()) >= settings.merge_similarity:
            hit, stored = known[int(similarity.argmax())]
            learned = dict(hit.payload["learned"])
            learned["count"] = int(learned.get("count", 1)) + 1
            learned["marks"] = [*learned.get("marks", []), mark][-MAX_MARKS:]
            text = str(hit.payload["matched_text"])
            payload = {**hit.payload, "learned": learned}
            payload.pop("tenant", None)
            self.store.upsert(
                tenant, [StoredPoint(id=hit.id, vector=stored, text=text, payload=payload)]
            )
            return FeedbackReceipt(chunk_id=chunk_id, helpful=True, learned_id=hit.id, merged=True)
        if len(known) >= settings.max_learned_per_chunk:
            weakest = min(
                known, key=lambda k: (k[0].payload["learned"].get("count", 1), _last(k[0]))
            )
            self._delete_one(tenant, weakest[0])
        point_id = learned_point_id(tenant, chunk_id, str(carrier["version"]), query)
        learned = {"id": point_id, "count": 1, "marks": [mark]}
        payload = learned_payload(carrier, query, learned)
        point = StoredPoint(id=point_id, vector=vector.tolist(), text=query, payload=payload)
        self.store.upsert(tenant, [point])
        relexicalise(self.store, tenant, chunk_id, str(carrier["version"]))
        return FeedbackReceipt(chunk_id=chunk_id, helpful=True, learned_id=point_id)

    def _demote(
        self,
        tenant: str,
        carrier: dict[str, Any],
        query: str,
        vector: np.ndarray,
        label: str,
        at: str,
        settings: FeedbackConfig,
    ) -> FeedbackReceipt:
        chunk_id = str(carrier["chunk_id"])
        record_id = feedback_record_id(tenant, chunk_id)
        found = self.store.retrieve(tenant, [record_id])
        text_hash = chunk_hash(str(carrier.get("content", "")))
        marks: list[dict[str, Any]] = []
        if found and found[0].payload.get("chunk_hash") == text_hash:
            marks = list(found[0].payload.get("unhelpful", []))
        similarity = _cosines(vector, [m["vector"] for m in marks])
        mark = {"who": label, "at": at}
        merged = bool(len(similarity)) and float(similarity.max()) >= settings.merge_similarity
        if merged:
            near = marks[int(similarity.argmax())]
            near["count"] = int(near.get("count", 1)) + 1
            near["marks"] = [*near.get("marks", []), mark][-MAX_MARKS:]
        else:
            if len(marks) >= settings.max_unhelpful_per_chunk:
                marks.sort(key=lambda m: (m.get("count", 1), m["marks"][-1]["at"]))
                marks.pop(0)
            rounded = [round(float(x), 5) for x in vector]
            marks.append({"text": query, "vector": rounded, "count": 1, "marks": [mark]})
        payload = {
            "record": FEEDBACK,
            "document_id": carrier["document_id"],
            "chunk_id": chunk_id,
            "chunk_hash": text_hash,
            "unhelpful": marks,
        }
        self.store.upsert(tenant, [StoredPoint(id=record_id, payload=payload)])
        return FeedbackReceipt(chunk_id=chunk_id, helpful=False, merged=merged)

    # -- what ranking reads ---------------------------------------------------------------
    def demotions(
        self, tenant: str, chunk_ids: list[str], vectors: list[list[float]]
    ) -> dict[str, int]:
        """Places each of ``chunk_ids`` moves down for a query of ``vectors``: those
        marked unhelpful for a query at least ``demote_similarity`` to one of them."""
        settings = self._settings()
        if not chunk_ids or not vectors or settings.demote_places == 0:
            return {}
        ids = [feedback_record_id(tenant, c) for c in chunk_ids]
        records = self.store.retrieve(tenant, ids)
        if not records:
            return {}
        queries = np.stack([_unit(v) for v in vectors])
        places: dict[str, int] = {}
        for record in records:
            marks = record.payload.get("unhelpful") or []
            if record.payload.get("record") != FEEDBACK or not marks:
                continue
            matrix = np.stack([_unit(m["vector"]) for m in marks])
            if float((matrix @ queries.T).max()) >= settings.demote_similarity:
                places[str(record.payload["chunk_id"])] = settings.demote_places
        return places

    # -- an admin's removal ---------------------------------------------------------------
    def remove_learned(self, tenant: str, learned_id: str) -> None:
        """Remove one learned matching text (its id: ``docs show``); one that is not a
        learned text of this tenant is not found."""
        found = self.store.retrieve(tenant, [learned_id]) if _is_uuid(learned_id) else []
        if not found or found[0].payload.get("match_kind") != LEARNED:
            raise DocumentNotFoundError(
                f"no learned matching text '{str(learned_id)[:200]}' in tenant '{tenant}'"
            )
        with self._writing:
            try:
                self._delete_one(tenant, found[0])
            finally:
                self.writes.written(tenant)

    def _delete_one(self, tenant: str, hit: Hit) -> None:
        """Delete one learned point: the others of its chunk are written back (the store
        deletes by filter only)."""
        payload = hit.payload
        filters = {
            "record": MATCH,
            "chunk_id": payload["chunk_id"],
            "version": payload["version"],
            "match_kind": LEARNED,
        }
        others = [(h, v) for h, v in self.store.scroll_vectors(tenant, filters) if h.id != hit.id]
        self.store.delete(tenant, filters)
        kept = []
        for other, vector in others:
            rest = {k: v for k, v in other.payload.items() if k != "tenant"}
            kept.append(
                StoredPoint(
                    id=other.id, vector=vector, text=str(rest["matched_text"]), payload=rest
                )
            )
        if kept:
            self.store.upsert(tenant, kept)
        relexicalise(self.store, tenant, str(payload["chunk_id"]), str(payload["version"]))


def _last(hit: Hit) -> str:
    marks = hit.payload["learned"].get("marks") or [{"at": ""}]
    return str(marks[-1]["at"])


def _is_uuid(value: object) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def _changing(carrier: dict[str, Any]) -> str:
    return (
        f"chunk '{carrier['chunk_id']}' is being indexed again or was removed; the mark was "
        "not kept: give it again once the document is indexed"
    )
