"""Dedup: exact duplicates of a stored document, and chunks nearly repeating a stored one."""

from __future__ import annotations

import asyncio
import json

import numpy as np

from flexmatch.access import ACCESS_FIELD, PUBLIC
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.points import CONTENT, MATCH, Filters
from flexmatch.engine.stores import VectorStore
from flexmatch.models import Document, IngestReport, MatchingText, SkippedDocument


class VectorSet:
    """Unit vectors, for the best cosine of a new one against those it nearly repeats.

    Each vector is filed under ``tables`` random-hyperplane signatures of ``bits`` bits
    (locality-sensitive hashing), and a new one is compared only with the vectors sharing
    a signature with it: a document's n chunks cost about n comparisons, not n²/2 (a
    10,000-chunk document took 94 s comparing each chunk with every earlier one). Equal
    vectors always share every signature; two at cosine 0.99 (the default near-duplicate
    threshold) share one in about 993 cases of 1,000, closer ones more surely still.
    """

    def __init__(self, bits: int = 16, tables: int = 8, seed: int = 0) -> None:
        self.bits = bits
        self.tables = tables
        self.seed = seed
        self._vectors: list[np.ndarray] = []
        self._planes: np.ndarray | None = None
        self._buckets: list[dict[int, list[int]]] = [{} for _ in range(tables)]
        self._weights = 1 << np.arange(bits, dtype=np.int64)

    def _keys(self, vector: np.ndarray) -> list[int]:
        if self._planes is None:
            rng = np.random.default_rng(self.seed)
            shape = (self.tables * self.bits, len(vector))
            self._planes = rng.standard_normal(shape).astype(np.float32)
        signs = (self._planes @ vector > 0).reshape(self.tables, self.bits)
        return [int(key) for key in signs.astype(np.int64) @ self._weights]

    def add(self, vector: np.ndarray) -> None:
        index = len(self._vectors)
        self._vectors.append(vector)
        for table, key in zip(self._buckets, self._keys(vector), strict=True):
            table.setdefault(key, []).append(index)

    def max_similarity(self, vector: np.ndarray) -> float:
        """The best cosine among the vectors sharing a signature with ``vector`` (-1.0
        when none does)."""
        if not self._vectors:
            return -1.0
        keys = self._keys(vector)
        near = {
            i for table, key in zip(self._buckets, keys, strict=True) for i in table.get(key, ())
        }
        if not near:
            return -1.0
        return float(np.max(np.stack([self._vectors[i] for i in near]) @ vector))


def _named(document_id: str, uri: str, access: list[str] | None) -> str:
    """The twin a duplicate is skipped for, as its writer's report names it: by id and uri
    when the whole tenant may read it; a restricted one unnamed, as the writer (a key
    writing with the source's access) may not be one of its readers."""
    if access is None or PUBLIC in access:
        return f"document {document_id} ({uri})"
    return "a document already stored with the same access"


def _same_text_key(content_hash: str, access: list[str] | None) -> str:
    return json.dumps([content_hash, access])


class TwinOrder:
    """Which of a run's identical texts is written: the one given first. Documents are
    checked concurrently (a small one's hash is ready before a big one's), so each takes
    a ticket as it enters the run and decides whether it is a duplicate only once every
    earlier ticket has decided (or ended)."""

    def __init__(self) -> None:
        self._next = 0
        self._undecided: dict[int, asyncio.Event] = {}  # the tickets in flight

    def take(self) -> int:
        ticket = self._next
        self._next += 1
        self._undecided[ticket] = asyncio.Event()
        return ticket

    async def turn(self, ticket: int) -> None:
        for earlier, event in list(self._undecided.items()):
            if earlier < ticket:
                await event.wait()

    def decided(self, ticket: int) -> None:
        event = self._undecided.pop(ticket, None)
        if event is not None:
            event.set()


class Duplicates:
    """One run's duplicate checks in one tenant: a document whose text is stored (or taken
    by this run) under another id is skipped; a chunk nearly repeating one already stored
    or accepted is dropped. Only copies with the same access count: a document is never
    skipped for one some of its readers cannot read."""

    def __init__(
        self,
        store: VectorStore,
        registry: DocumentRegistry,
        tenant: str,
        threshold: float | None,
        report: IngestReport,
    ) -> None:
        self.store = store
        self.registry = registry
        self.tenant = tenant
        self.threshold = threshold
        self.report = report
        # the id and uri of each text this run wrote, not the document: a run's memory
        # must not grow with the text it reads (a 17 MB folder held all 17 MB to the end)
        self._hashes_in_run: dict[str, tuple[str, str]] = {}

    def of_document(
        self, document: Document, content_hash: str, access: list[str] | None
    ) -> SkippedDocument | None:
        """An identical text already stored (or taken by this run) under another id, with
        the same access."""
        same = [
            r
            for r in self.registry.with_content(self.tenant, content_hash)
            if r.id != document.id and r.access == access
        ]
        if same:
            reason = f"same content as {_named(same[0].id, same[0].uri, access)}"
            return SkippedDocument(uri=document.uri, document_id=document.id, reason=reason)
        earlier = self._hashes_in_run.get(_same_text_key(content_hash, access))
        if earlier is not None and earlier[0] != document.id:
            reason = f"same content as {_named(*earlier, access)} in this run"
            return SkippedDocument(uri=document.uri, document_id=document.id, reason=reason)
        return None

    def claim(self, document: Document, content_hash: str, access: list[str] | None) -> None:
        """This run writes ``document``'s text: a later twin in the run is its duplicate."""
        self._hashes_in_run[_same_text_key(content_hash, access)] = (document.id, document.uri)

    def near_chunk(
        self,
        document: Document,
        pairs: list[tuple[MatchingText, list[float]]],
        seen: VectorSet,
        access: list[str] | None,
    ) -> bool:
        """Whether this chunk's content text is (nearly) one already stored or accepted
        (``seen``: this document's earlier chunks)."""
        threshold = self.threshold
        content = next((v for m, v in pairs if m.kind == CONTENT), pairs[0][1])
        vector = np.asarray(content, dtype=np.float32)
        if threshold is not None:
            if seen.max_similarity(vector) >= threshold:
                self.report.near_duplicate_chunks += 1
                return True
            contents: Filters = {"record": MATCH, "match_kind": CONTENT}
            if access is not None:  # overlapping or unrestricted ones; equal ones kept below
                contents[ACCESS_FIELD] = access
            hits = self.store.search(self.tenant, content, 5, contents)
            others = [
                h
                for h in hits
                if h.payload.get("document_id") != document.id
                and h.score >= threshold
                and (h.payload.get(ACCESS_FIELD) or None) == access
            ]  # usually none: then no version look-up either
            if self.registry.visible(self.tenant, others):
                self.report.near_duplicate_chunks += 1
                return True
        seen.add(vector)
        return False
