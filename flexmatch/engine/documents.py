"""Ingestion state kept in the store itself, so every store behaves the same.

Each document has a *record*: a point without vectors (so searches never see it) whose
payload is a ``DocumentRecord``. Writing a record is one point upsert, which makes it the
commit point of a document:

1. ``begin``: the record gets ``pending_version`` (readers still see ``version``);
2. the new version's matching-text points are written;
3. ``commit``: ``version = pending_version``, status complete: readers switch at once;
4. ``cleanup``: points of every other version are deleted, ``pending_version`` cleared.

Readers keep only points whose version is their document's committed version
(``visible``), so they never see a mix of versions, nor none. A run killed anywhere
leaves a record with ``pending_version`` set, which ``repair`` cleans up.
"""

from __future__ import annotations

import builtins
import json
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from flexmatch.access import ACCESS_FIELD, Principal, access_filter, readable
from flexmatch.engine.points import (
    CONTENT,
    DOCUMENT,
    FEEDBACK,
    MATCH,
    MatchPayload,
    parse_record,
    record_payload,
)
from flexmatch.engine.stores.base import Filters, Hit, StoredPoint, VectorStore
from flexmatch.models import ChunkView, DocumentDetail, DocumentRecord, Stats
from flexmatch.models import SourceStats as SourceCounts

RECORD_NAMESPACE = uuid.UUID("0b5f8f3e-3c1e-4d55-9a57-0e4f0f5c9d21")
INTERRUPTED = "interrupted before it was complete"


def record_id(tenant: str, document_id: str) -> str:
    return str(uuid.uuid5(RECORD_NAMESPACE, json.dumps([tenant, document_id])))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Visibility:
    """Which match points readers may see, as of the moment it was read.

    A *finished* document (no write in flight, none interrupted: its record's
    ``unfinished`` is "no") holds points of its committed version only, because
    ``cleanup`` deletes every other version before it marks the record finished. So only
    the unfinished documents, usually none, need their versions checked: one indexed
    look-up per query instead of a read of every hit's record. Read it *after* the
    searches whose hits it judges: a write that begins later is then still unfinished
    when it is read, or its points were not there to be found."""

    def __init__(self, unfinished: dict[str, str | None]) -> None:
        self.unfinished = unfinished  # document id → its committed version (None: none yet)

    def __call__(self, hit: Hit) -> bool:
        document_id = str(hit.payload.get("document_id"))
        if document_id not in self.unfinished:
            return True
        committed = self.unfinished[document_id]
        return committed is not None and hit.payload.get("version") == committed


class DocumentRegistry:
    """Document records and the version protocol, over any ``VectorStore``."""

    def __init__(self, store: VectorStore) -> None:
        self.store = store

    # -- records -----------------------------------------------------------------------
    def get(self, tenant: str, document_id: str) -> DocumentRecord | None:
        return self.get_many(tenant, [document_id]).get(document_id)

    def get_many(self, tenant: str, document_ids: list[str]) -> dict[str, DocumentRecord]:
        ids = [record_id(tenant, d) for d in dict.fromkeys(document_ids)]
        hits = self.store.retrieve(tenant, ids)
        records = [parse_record(h.payload) for h in hits if h.payload.get("record") == DOCUMENT]
        return {r.id: r for r in records}

    def put(self, tenant: str, record: DocumentRecord) -> DocumentRecord:
        record = record.model_copy(update={"updated_at": _now()})
        point = StoredPoint(id=record_id(tenant, record.id), payload=record_payload(record))
        self.store.upsert(tenant, [point])
        return record

    def readable(
        self, tenant: str, document_id: str, principal: Principal | None
    ) -> DocumentRecord | None:
        """The record of a document ``principal`` may read; None for one it may not, as for
        one that does not exist (so a reader learns nothing of what it cannot read)."""
        record = self.get(tenant, document_id)
        return record if record is not None and readable(record.access, principal) else None

    def list(
        self, tenant: str, source: str | None = None, principal: Principal | None = None
    ) -> list[DocumentRecord]:
        """The records ``principal`` may read (``None``: all), by an indexed filter."""
        filters: Filters = {"record": DOCUMENT, **access_filter(principal)}
        if source:
            filters["source"] = source
        records = [parse_record(h.payload) for h in self.store.scroll(tenant, filters)]
        return sorted(records, key=lambda r: (r.source, r.uri))

    def restricted(self, tenant: str) -> bool:
        """Whether any document of ``tenant`` is not readable by its whole tenant (two
        indexed counts: all records, and those ``Principal()`` may read)."""
        every = self.store.count(tenant, {"record": DOCUMENT})
        return every > self.store.count(tenant, {"record": DOCUMENT, **access_filter(Principal())})

    # below, ``list`` is the method above: annotations say ``builtins.list``
    def with_content(self, tenant: str, content_hash: str) -> builtins.list[DocumentRecord]:
        """Complete documents holding exactly this text."""
        hits = self.store.scroll(tenant, {"record": DOCUMENT, "content_hash": content_hash})
        return [r for r in (parse_record(h.payload) for h in hits) if r.status == "complete"]

    # -- the version protocol ------------------------------------------------------------
    def update(self, tenant: str, record: DocumentRecord, **changes: object) -> DocumentRecord:
        return self.put(tenant, record.model_copy(update=changes))

    def set_access(
        self, tenant: str, record: DocumentRecord, access: builtins.list[str] | None
    ) -> DocumentRecord:
        """Change who may read a document: its points' payload, then its record; nothing
        re-embedded, no new version. (Points first: a narrowing is in force for searches
        before the record says so.)"""
        self.store.set_payload(
            tenant, {"record": MATCH, "document_id": record.id}, {ACCESS_FIELD: access}
        )
        return self.update(tenant, record, access=access)

    def begin(self, tenant: str, record: DocumentRecord, version: str) -> DocumentRecord:
        return self.update(tenant, record, pending_version=version, status="pending", error=None)

    def commit(
        self,
        tenant: str,
        record: DocumentRecord,
        chunks: int,
        matching_texts: int,
        access: builtins.list[str] | None,
    ) -> DocumentRecord:
        """Switch readers to the pending version and its ``access`` in one record write (a
        pending version never changes who may read the document: a failed one leaves the
        committed version's access as it was)."""
        committed = self.update(
            tenant,
            record,
            access=access,
            version=record.pending_version,
            status="complete",
            chunks=chunks,
            matching_texts=matching_texts,
            error=None,
        )
        return self.cleanup(tenant, committed)

    def fail(self, tenant: str, record: DocumentRecord, error: str) -> DocumentRecord:
        """Keep the committed version visible and drop what the failed write left."""
        failed = self.update(tenant, record, status="failed", error=error)
        return self.cleanup(tenant, failed)

    def cleanup(self, tenant: str, record: DocumentRecord) -> DocumentRecord:
        """Delete every point of the document that is not its committed version."""
        keep: Filters | None = {"version": record.version} if record.version else None
        self.store.delete(tenant, {"record": MATCH, "document_id": record.id}, must_not=keep)
        return self.update(tenant, record, pending_version=None)

    def repair(self, tenant: str) -> int:
        """Finish what interrupted runs left: stale points removed, removals completed."""
        repaired = 0
        hits = self.store.scroll(tenant, {"record": DOCUMENT, "unfinished": "yes"})
        for record in (parse_record(h.payload) for h in hits):
            if record.status == "removing":
                self.remove(tenant, record.id)
            elif record.pending_version is not None:
                record = self.cleanup(tenant, record)
                if record.status == "pending" and record.version is not None:
                    self.update(tenant, record, status="complete")  # the committed one is whole
                elif record.status == "pending":  # nothing was ever committed: ingest it again
                    self.update(tenant, record, status="failed", error=INTERRUPTED)
            else:
                continue
            repaired += 1
        return repaired

    def remove(self, tenant: str, document_id: str) -> bool:
        """Delete a document and its points; False when this tenant has no such document."""
        record = self.get(tenant, document_id)
        if record is None:
            return False
        self.update(tenant, record, status="removing")
        self.store.delete(tenant, {"record": MATCH, "document_id": document_id})
        self.store.delete(tenant, {"record": FEEDBACK, "document_id": document_id})
        self.store.delete(tenant, {"record": DOCUMENT, "document_id": document_id})
        return True

    # -- reading -----------------------------------------------------------------------
    def visibility(self, tenant: str) -> Visibility:
        """What readers may see now (see ``Visibility``), in one indexed look-up."""
        hits = self.store.scroll(tenant, {"record": DOCUMENT, "unfinished": "yes"})
        records = [parse_record(h.payload) for h in hits]
        return Visibility({r.id: r.version for r in records})

    def visible(self, tenant: str, hits: builtins.list[Hit]) -> builtins.list[Hit]:
        """Only points of their document's committed version."""
        if not hits:
            return []
        seen = self.visibility(tenant)
        return [h for h in hits if seen(h)]

    def detail(
        self, tenant: str, document_id: str, principal: Principal | None = None
    ) -> DocumentDetail | None:
        record = self.readable(tenant, document_id, principal)
        if record is None:
            return None
        chunks: dict[str, ChunkView] = {}
        points = self.store.scroll(tenant, {"record": MATCH, "document_id": document_id})
        for hit in self.visible(tenant, points):
            p = MatchPayload.model_validate(hit.payload)
            view = chunks.get(p.chunk_id)
            if view is None or "content" in hit.payload:  # the carrier holds the chunk
                texts = view.matching_texts if view is not None else []
                view = chunks[p.chunk_id] = p.chunk_view(texts)
            view.matching_texts.append(p.matching_text())
        ordered = sorted(chunks.values(), key=lambda c: c.index)
        for view in ordered:
            view.matching_texts.sort(key=lambda m: (m.kind == CONTENT, m.text))
        return DocumentDetail(document=record, chunks=ordered)

    def stats(self, tenant: str, principal: Principal | None = None) -> Stats:
        """Counts of what ``principal`` may read (``None``: everything)."""
        sources: dict[str, SourceCounts] = {}
        records = self.list(tenant, principal=principal)
        for record in records:
            counts = sources.setdefault(record.source, SourceCounts())
            if record.version is not None:
                counts.documents += 1
                counts.chunks += record.chunks
                counts.matching_texts += record.matching_texts
        return Stats(
            tenant=tenant,
            documents=sum(c.documents for c in sources.values()),
            incomplete_documents=sum(1 for r in records if r.status != "complete"),
            chunks=sum(c.chunks for c in sources.values()),
            matching_texts=sum(c.matching_texts for c in sources.values()),
            sources=sources,
            store_bytes=self.store.size_bytes() if principal is None else None,
        )


class ActiveRuns:
    """Ingest runs in progress per tenant, so a run never repairs another's pending work."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        # runs start on several threads (the store's socket, a server's, a watch's)
        self._lock = threading.Lock()

    def enter(self, tenant: str, repair: Callable[[], int]) -> int:
        """Count a run in; the first of a tenant's runs first repairs what killed runs
        left pending (``repair``, its count returned), at once with its entry: a run
        that starts meanwhile waits, so none repairs another's pending documents."""
        with self._lock:
            repaired = 0 if self._counts.get(tenant, 0) else repair()
            self._counts[tenant] = self._counts.get(tenant, 0) + 1
            return repaired

    def leave(self, tenant: str) -> None:
        with self._lock:
            self._counts[tenant] -= 1
