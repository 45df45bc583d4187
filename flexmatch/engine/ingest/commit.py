"""Commit: a document's checks, then begin → work → points → upsert → commit.

The commit protocol is ``engine.documents``': a pending version is begun on the
document's record, its points written, and the version committed only when every point
is; readers see the committed version until then, and a failure leaves it as it was.
Unchanged documents cost nothing; duplicates are skipped (``dedup``).
"""

from __future__ import annotations

import asyncio

from flexmatch.access import ACCESS_FIELD, Principal, check_sets_no_access, readable
from flexmatch.config import IngestConfig
from flexmatch.engine.archive import DocumentArchive
from flexmatch.engine.chains.sources import SourceChains
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.ingest.dedup import Duplicates, TwinOrder, VectorSet
from flexmatch.engine.ingest.embed import Work
from flexmatch.engine.ingest.threads import in_ingest_thread
from flexmatch.engine.ingest.versions import (
    document_version,
    is_current,
    stored_metadata,
    with_naming_of,
)
from flexmatch.engine.learned import carried_learned, prune_unhelpful, with_learned_words
from flexmatch.engine.points import (
    CHUNK_FIELDS,
    CONTENT,
    MatchPayload,
    filterable_metadata,
    lexical_text,
    match_point_id,
    on_topic,
)
from flexmatch.engine.stores import StoredPoint, VectorStore
from flexmatch.errors import (
    ConfigError,
    DocumentTooLargeError,
    FlexMatchError,
    WriteConflictError,
    WriteRefusedError,
)
from flexmatch.inputs.sources.files import NAMING_METADATA
from flexmatch.inputs.sources.validators import validators
from flexmatch.models import (
    Chunk,
    Document,
    DocumentRecord,
    FailedDocument,
    IngestReport,
    Location,
    MatchingText,
    shared_fields,
)
from flexmatch.payloads import check_document_id, check_metadata, check_value

UPSERT_SLICE = 128  # points per store call (see ``Indexer._write_points``)


class Indexer:
    """Ingest path for one run: each document checked, enriched and embedded (``work``),
    then committed.

    Unchanged documents cost nothing; exact duplicates and near-duplicate chunks are
    skipped; a failure is recorded on the document and the run goes on. ``work`` is the
    expensive part (chains and embedding): in this process (``embed.LocalWork``), on Ray workers
    for a distributed ingest (``fanout``); the checks and the commit protocol around it
    are the same either way, and only this process writes.
    """

    def __init__(
        self,
        store: VectorStore,
        tenant: str,
        settings: IngestConfig,
        report: IngestReport,
        work: Work,
        *,
        archive: DocumentArchive | None = None,
        concurrency: int | None = None,
        writer: Principal | None = None,
    ) -> None:
        self.store = store
        self.writer = writer  # who writes (None: everything, an admin)
        self.registry = DocumentRegistry(store)
        self.archive = archive
        self.tenant = tenant
        self.settings = settings
        self.report = report
        self.work = work
        self.duplicates = Duplicates(
            store, self.registry, tenant, settings.near_duplicate_threshold, report
        )
        # of identical texts in the run, the first given is kept; the slots and the locks
        # hand out in arrival order, so the earliest undecided ticket always gets on
        self._twins = TwinOrder()
        self._slots = asyncio.Semaphore(concurrency or settings.document_concurrency)
        # one writer per document id: its lock, and how many calls hold or await it
        self._writing: dict[str, tuple[asyncio.Lock, int]] = {}

    async def index(self, document: Document, chains: SourceChains) -> None:
        ticket = self._twins.take()  # before any wait: in the order documents are given
        lock, users = self._writing.get(document.id, (asyncio.Lock(), 0))
        self._writing[document.id] = (lock, users + 1)
        try:
            async with self._slots:
                if users:  # an earlier copy of this id is written first: waiting for it
                    # must not hold up the run's other documents, so this one gives up
                    # its place among twins (and is checked once it has the lock)
                    self._twins.decided(ticket)
                async with lock:
                    try:
                        await self._index(document, chains, ticket)
                    except FlexMatchError as exc:
                        failed = FailedDocument(uri=document.uri, error=str(exc))
                        self.report.record_failed(failed)
                    except Exception as exc:  # a bug or an OS error: report it, go on
                        error = f"{document.uri}: {type(exc).__name__}: {exc}"
                        self.report.record_failed(FailedDocument(uri=document.uri, error=error))
        finally:  # a lock for each document in flight, not for each one of the run
            self._twins.decided(ticket)
            lock, users = self._writing[document.id]
            if users == 1:
                del self._writing[document.id]
            else:
                self._writing[document.id] = (lock, users - 1)

    async def _index(self, document: Document, chains: SourceChains, ticket: int) -> None:
        """begin → work → points → upsert → commit; a failure anywhere leaves the committed
        version as it was."""
        # off the loop: a big document's text, hash and payload check take a while
        content_hash, version, tokens = await in_ingest_thread(
            _checked, document, chains, self.settings.max_document_bytes
        )
        record = self.registry.get(self.tenant, document.id)
        check_writable(document, record, self.writer, self.tenant)
        access = chains.access_of(document)
        if access is None and record is not None:
            access = record.access  # a new version declaring none keeps it: never wider
        check_access_set(document, record, access, self.writer)
        if self.writer is not None and record is not None:
            # only an admin changes who may read a stored document: not by its metadata
            # (refused above), nor by a path that steers it to another access rule
            access = record.access
        document = with_naming_of(document, record)
        if record is not None and record.source != document.source:
            # ids are per tenant: two sources (or plug-ins) naming items alike must not
            # overwrite each other's documents
            raise ConfigError(
                f"{document.uri}: document id '{document.id}' already belongs to source "
                f"'{record.source}' ({record.uri}); one source never replaces another's "
                "document (give the items ids of their own, or remove that document first)"
            )
        if await self._unchanged(document, record, version, content_hash, access, chains):
            return
        # a changed one keeps its old version
        await self._twins.turn(ticket)
        duplicate = self.duplicates.of_document(document, content_hash, access)
        if duplicate is not None:
            self.report.record_duplicate(duplicate)
            return
        self.duplicates.claim(document, content_hash, access)
        self._twins.decided(ticket)
        begun = pending_record(document, record, content_hash)
        if begun.version is None:  # nothing committed yet: it is readable as it will be
            begun = begun.model_copy(update={"access": access})
        # else readers keep the committed version's access until the commit switches both
        pending = self.registry.begin(self.tenant, begun, version)
        try:
            enriched = await self.work(document, chains)
            points = await in_ingest_thread(
                self.points, document, enriched.chunks, version, enriched.vectors, access
            )
            await self._write_points(points)
            if record is not None and record.version is not None:  # what use taught, kept
                learned = await in_ingest_thread(
                    carried_learned, self.store, self.tenant, document.id, record.version, points
                )
                await self._write_points(learned)
                await self._write_points(with_learned_words(points, learned))
        except Exception as exc:
            self.registry.fail(self.tenant, pending, str(exc) or type(exc).__name__)
            raise
        current = self.registry.get(self.tenant, document.id)
        if record is not None and current is not None:  # access may change meanwhile
            check_writable(document, current, self.writer, self.tenant)
        if current is None or current.pending_version != version:
            raise WriteConflictError(
                f"{document.uri}: another writer replaced it while it was indexed"
            )
        stored_chunks = len({p.payload["chunk_id"] for p in points})
        if self.archive is not None:  # before the commit: a committed version is archived
            await asyncio.to_thread(self.archive.put, self.tenant, document)
        self.registry.commit(self.tenant, pending, stored_chunks, len(points), access)
        if record is not None and record.version is not None:
            await in_ingest_thread(prune_unhelpful, self.store, self.tenant, document.id, points)
        self.report.record_stored(
            document.id,
            document.uri,
            changed=record is not None and record.version is not None,
            chunks=stored_chunks,
            matching_texts=len(points),
            document_tokens=tokens,
        )

    async def _write_points(self, points: list[StoredPoint]) -> None:
        """Upsert on an ingest thread, ``UPSERT_SLICE`` points a call: the embedded store
        holds the GIL for a whole call (20,000 points: 1.6 s in which no other thread of
        the process, the event loop included, ran)."""
        for start in range(0, len(points), UPSERT_SLICE):
            await in_ingest_thread(
                self.store.upsert, self.tenant, points[start : start + UPSERT_SLICE]
            )

    async def _unchanged(
        self,
        document: Document,
        record: DocumentRecord | None,
        version: str,
        content_hash: str,
        access: list[str] | None,
        chains: SourceChains,
    ) -> bool:
        """Whether this version is the committed one (then nothing is spent on it; a
        changed access list is written onto its points, no embedding, no LLM call)."""
        if not (record and record.status == "complete"):
            return False
        if not is_current(record, version, content_hash, document.metadata, chains):
            return False
        if record.pending_version is not None:
            record = self.registry.cleanup(self.tenant, record)
        if record.access != access:
            record = await in_ingest_thread(self.registry.set_access, self.tenant, record, access)
        fresh = validators(document.metadata)
        if fresh != validators(record.metadata):  # kept for the next run's conditional read
            metadata = stored_metadata(document.metadata)
            if record.version != version:  # made when the place counted: it must stay
                named = {k: v for k, v in record.metadata.items() if k in NAMING_METADATA}
                metadata = {k: v for k, v in metadata.items() if k not in NAMING_METADATA}
                metadata |= named
            self.registry.update(self.tenant, record, metadata=metadata)
        if self.archive is not None and (
            fresh != validators(record.metadata) or not self.archive.has(self.tenant, document.id)
        ):
            await asyncio.to_thread(self.archive.put, self.tenant, document)  # kept from now
        self.report.record_unchanged(document.id, document.uri)
        return True

    def points(
        self,
        document: Document,
        chunks: list[Chunk],
        version: str,
        vectors: list[list[float]],
        access: list[str] | None = None,
    ) -> list[StoredPoint]:
        """One point per matching text; chunks that nearly duplicate a stored one dropped.
        ``access``: the document's access tokens (none: readable by its whole tenant)."""
        texts = [(chunk, m) for chunk in chunks for m in chunk.matching_texts]
        seen = VectorSet()  # this document's chunks: a repeated page is stored once
        by_chunk: dict[str, list[tuple[MatchingText, list[float]]]] = {}
        for (chunk, matching), vector in zip(texts, vectors, strict=True):
            by_chunk.setdefault(chunk.id, []).append((matching, vector))
        points = []
        metadata = filterable_metadata(stored_metadata(document.metadata))  # whole: on the record
        of_document = {
            **shared_fields(document, MatchPayload),  # uri, source, title
            "metadata": metadata,
            "version": version,
            "access": access,
        }
        for chunk in chunks:
            pairs = on_topic(by_chunk.get(chunk.id, []))
            if not pairs or self.duplicates.near_chunk(document, pairs, seen, access):
                continue
            of_chunk = {
                **of_document,
                **shared_fields(chunk, MatchPayload),  # heading_path, qualifying_text, ...
                "chunk_id": chunk.id,
                "chunk_index": chunk.index,
                "content": chunk.text,
            }
            for position, (matching, vector) in enumerate(pairs):
                payload = MatchPayload.model_validate(
                    {
                        **of_chunk,
                        "matched_text": matching.text,
                        "match_kind": matching.kind,
                        "matched_location": matching.location,
                    }
                ).model_dump(exclude=_unstored(position, access, matching.location))
                points.append(
                    StoredPoint.model_construct(  # checked above: no copy of each vector
                        id=match_point_id(self.tenant, chunk.id, version, position),
                        vector=vector,
                        text=lexical_text(matching.text, [(m.kind, m.text) for m, _ in pairs])
                        if matching.kind == CONTENT
                        else matching.text,
                        payload=payload,
                    )
                )
        return points


def check_writable(
    document: Document, record: DocumentRecord | None, writer: Principal | None, tenant: str
) -> None:
    """Refuse a write that would replace a stored document ``writer`` may not read, before
    anything about that document (its source, its version, whether it changed) decides
    the answer: the refusal is the same whoever may read it and whatever it holds, and
    the document is left as it was. A new id is writable; docs/security.md ("Writes")
    says what the refusal still tells (that the id is taken) and why."""
    if record is not None and not readable(record.access, writer):
        raise WriteRefusedError(refusal(document.uri, document.id, tenant))


def check_access_set(
    document: Document,
    record: DocumentRecord | None,
    access: list[str] | None,
    writer: Principal | None,
) -> None:
    """Only an admin says who may read a document: a writer who is not one may not give
    a document access of its own (``metadata.access``) that differs from what is stored,
    whichever path the write came by; resending the stored access unchanged is fine."""
    if writer is None or ACCESS_FIELD not in document.metadata:
        return
    if record is None or record.access != access:
        try:
            check_sets_no_access(writer, f"metadata.{ACCESS_FIELD}")
        except WriteRefusedError as exc:
            raise WriteRefusedError(f"{document.uri}: {exc}") from None


def refusal(uri: str, document_id: str, tenant: str) -> str:
    """The one answer to a write this writer may not make, whichever the document."""
    return (
        f"{uri}: document id '{document_id}' in tenant '{tenant}' cannot be written by this "
        "principal (choose another id, or ask an admin)"
    )


def _unstored(position: int, access: list[str] | None, matched: Location | None) -> set[str] | None:
    """The fields a match point leaves out: the chunk's own, except on its carrier;
    ``access`` when it has none and ``matched_location`` when its text has no location
    of its own (its payload then is as it was before either existed)."""
    left = {"learned"} if position == 0 else {"learned", *CHUNK_FIELDS}
    if access is None:
        left.add(ACCESS_FIELD)
    if matched is None:
        left.add("matched_location")
    return left or None


def _checked(document: Document, chains: SourceChains, limit: int) -> tuple[str, str, int]:
    """A document's size and payload checked, then its content hash, version and tokens:
    the whole-text work of an ingest, done once and off the event loop."""
    check_size(document, limit)
    check_storable(document)  # before anything of it is written, the pending record too
    return document.content_hash, document_version(document, chains), len(document.text) // 4


def check_size(document: Document, limit: int) -> None:
    """Refuse a document whose extracted text is over the byte cap."""
    size = len(document.text.encode("utf-8"))
    if size > limit:
        raise DocumentTooLargeError(
            f"{document.uri}: extracted text is {size:,} bytes, over the {limit:,}-byte cap "
            "(ingest.max_document_bytes)"
        )


def check_storable(document: Document) -> None:
    """Refuse a document whose identity or metadata the store could not hold or read back
    (see ``flexmatch.payloads``), naming the field."""
    where = (document.uri or document.id)[:300]
    check_value([document.id, document.uri, document.title, document.source], where, 2)
    check_document_id(document.id, where)
    check_metadata(document.metadata, where)


def pending_record(
    document: Document, record: DocumentRecord | None, content_hash: str
) -> DocumentRecord:
    """The record a new version of ``document`` (of text ``content_hash``) is begun on
    (its last one, updated)."""
    base = record or DocumentRecord(
        id=document.id,
        source=document.source,
        uri=document.uri,
        content_hash=content_hash,
    )
    return base.model_copy(
        update={
            "source": document.source,
            "uri": document.uri,
            "title": document.title,
            "content_hash": content_hash,
            "metadata": stored_metadata(document.metadata),
        }
    )
