"""The embedded default store: the Qdrant engine in-process (qdrant-edge), on disk.

Chosen over qdrant-client's local mode, which commits every point to SQLite on its own
and searches in Python (see LIBRARY-NOTES.md): edge writes 100k points in seconds and
survives a kill -9. One process at a time (the engine has no read-only open): the holder
shares it with other processes (``on_hold`` starts ``flexmatch.sharing``'s socket), so a
second one meets the lock only when nobody shares it; then it fails at once if
``flexmatch serve`` holds the store, naming the server and pointing to its HTTP API, and
otherwise waits for the lock, then fails naming the holder (``holders``). The store is
its owner's alone: its folder 700, its files 600 (``_restrict``, at creation, open and
close), as the engine creates them with the process's umask (often 644); while it runs,
the 700 folder guards the files it adds.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flexmatch.access import ACCESS_FIELD
from flexmatch.engine.folders import private_folder
from flexmatch.engine.stores.base import (
    DENSE,
    INDEXED_FIELDS,
    LEXICAL,
    SCHEMA_VERSION,
    Filters,
    Hit,
    QueryMethods,
    Scope,
    StoredPoint,
    check_payload,
    check_points,
    in_tenant,
    lexical_document,
    mismatch_message,
    scoped_conditions,
)
from flexmatch.engine.stores.holders import IN_USE, lock_holder, served_by
from flexmatch.errors import ModelMismatchError, StoreError

META_FILE = "flexmatch-store.json"
Query = tuple[Any, str, int, Scope, list[str] | None]  # see QueryMethods._query_batch
log = logging.getLogger("flexmatch.store")
# how the engine fails on a stored payload it cannot decode (one nested too deeply)
UNREADABLE_PAYLOAD = ("Failed to deserialize payload", "Failed to decode value")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _restrict(path: Path) -> None:
    """Owner-only modes for the store: folders 700, files 600. The folder's mode is what
    guards files the engine adds later (new segments), whatever their own mode."""
    for folder, _, files in os.walk(path):
        os.chmod(folder, 0o700)
        for name in files:
            target = os.path.join(folder, name)
            if not os.path.islink(target):
                os.chmod(target, 0o600)


def disk_bytes(path: Path) -> int:
    """Allocated size (blocks), where the platform says; else the apparent size."""
    stat = path.stat()
    blocks = getattr(stat, "st_blocks", None)
    return stat.st_size if blocks is None else int(blocks) * 512


def _edge() -> Any:
    import qdrant_edge

    return qdrant_edge


def _condition(key: str, value: Any) -> Any:
    """One field condition; the common ones (tenant, record, kinds) are made once, as a
    query's completion batch repeats them in a hundred searches."""
    return _cached_condition(key, tuple(value) if isinstance(value, list) else value)


@functools.lru_cache(maxsize=4096)
def _cached_condition(key: str, value: Any) -> Any:
    edge = _edge()
    match = edge.MatchAny(list(value)) if isinstance(value, tuple) else edge.MatchValue(value)
    condition = edge.FieldCondition(key=key, match=match)
    if key == ACCESS_FIELD:  # any of the asker's tokens, or no access list: the whole tenant's
        return edge.Filter(should=[condition, edge.IsEmptyCondition(ACCESS_FIELD)])
    return condition


def unreadable_payload(exc: BaseException) -> bool:
    """Whether ``exc`` is the engine failing to decode a stored payload: the one error the
    reads work around (older versions stored payloads nested too deeply to read back)."""
    return any(marker in str(exc) for marker in UNREADABLE_PAYLOAD)


def read_payloads(
    shard: Any, ids: list[Any], batch: int = 256
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The payloads of ``ids`` by id, and apart the ids whose payload cannot be decoded:
    a batch that fails is split in halves until the failing points are alone, so k bad
    points among n cost about k * log2(n) extra reads."""
    found: dict[str, dict[str, Any]] = {}
    bad: list[str] = []
    pending = [ids[i : i + batch] for i in range(0, len(ids), batch)][::-1]
    while pending:
        part = pending.pop()
        try:
            records = shard.retrieve(part, True, False)
        except Exception as exc:
            if not unreadable_payload(exc):
                raise
            if len(part) == 1:
                bad.append(str(part[0]))
            else:
                pending += [part[len(part) // 2 :], part[: len(part) // 2]]
            continue
        found.update((str(r.id), dict(r.payload or {})) for r in records)
    return found, bad


def all_point_ids(shard: Any, selector: Any = None, page: int = 1000) -> list[Any]:
    """Every point id in the shard (that ``selector`` matches), read without payloads
    (which may not decode)."""
    ids: list[Any] = []
    offset: Any = None
    while True:
        request = _edge().ScrollRequest(
            offset=offset, limit=page, filter=selector, with_payload=False
        )
        records, offset = shard.scroll(request)
        ids.extend(r.id for r in records)
        if offset is None or not records:
            return ids


class EdgeStore(QueryMethods):
    """Points in a folder, written through Qdrant's write-ahead log."""

    def __init__(
        self,
        path: Path,
        lock_timeout: float = 0.0,
        indexing_threshold_kb: int | None = None,
        on_hold: Callable[[bool], None] | None = None,
    ) -> None:
        self.path = path
        self.lock_timeout = lock_timeout
        self.on_hold = on_hold  # told True when this process takes the store, False at close
        self.indexing_threshold_kb = indexing_threshold_kb  # None: the engine's default
        self._shard: Any = None
        self._closed = False  # closed for good: its holder opens a new one (``_open``)
        self._opening = threading.Lock()
        self._unreadable: set[str] = set()  # points whose payload cannot be decoded
        self._access_indexed = False  # see ``set_payload``

    def engine(self) -> Any:
        """The open engine shard, for maintenance that the store interface has no words
        for (``repair``)."""
        return self._open()

    def _skip(self, ids: list[str]) -> None:
        """Leave these points out of every later read and delete (a delete that reaches
        them fails and blocks the store's writes until it is reopened), and say so once."""
        new = sorted(set(ids) - self._unreadable)
        if not new:
            return
        self._unreadable.update(new)
        shown = ", ".join(new[:10]) + (f" and {len(new) - 10} more" if len(new) > 10 else "")
        log.warning(
            "the store at %s holds %d point(s) whose payload cannot be read (%s); they are "
            "skipped: run `flexmatch doctor --fix` to remove them",
            self.path,
            len(new),
            shown,
        )

    # -- lifecycle -------------------------------------------------------------------
    def exists(self) -> bool:
        """An open shard exists: only a closed store is looked for on disk (every read
        asks, and a stat per call cost an ingest ~2 % of its time)."""
        return self._shard is not None or (self.path / META_FILE).is_file()

    def check(self) -> None:
        if self.exists():
            self._open()  # waits for another process's lock, then names the holder

    def recorded_model(self) -> str | None:
        return self._meta().get("embedding_model") if self.exists() else None

    def _meta(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.path / META_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise StoreError(f"{self.path / META_FILE}: unreadable store metadata: {exc}") from exc

    def _open(self) -> Any:
        with self._opening:
            return self._open_unlocked()

    def _open_unlocked(self) -> Any:
        if self._shard is None:
            if self._closed:  # reopening here would retake the lock behind its holder's back
                raise StoreError(
                    f"the store at {self.path} was closed while this call used it; try again"
                )
            if not self.exists():
                raise StoreError(f"no store at {self.path} yet: ingest something first")
            schema = self._meta().get("schema")
            if schema != SCHEMA_VERSION:
                raise StoreError(
                    f"the store at {self.path} has schema {schema}, this FlexMatch reads "
                    f"schema {SCHEMA_VERSION}; re-ingest into a new knowledge base"
                )
            self._refuse_if_served()
            deadline = time.monotonic() + self.lock_timeout
            while True:
                try:
                    self._shard = _edge().EdgeShard.load(str(self.path / "shard"))
                    with contextlib.suppress(OSError):  # a store made before, or copied in
                        _restrict(self.path)
                    if self.on_hold is not None:
                        self.on_hold(True)  # others may work through this process now
                    break
                except Exception as exc:
                    locked = "WouldBlock" in str(exc) or "lock" in str(exc).lower()
                    if locked:
                        self._refuse_if_served()  # a server that started meanwhile
                    if locked and time.monotonic() < deadline:
                        time.sleep(0.2)
                        continue
                    if locked:
                        holder = lock_holder(self.path / "shard" / "wal")
                        by = f" ({holder.describe()})" if holder else ""
                        raise StoreError(
                            f"the store at {self.path} {IN_USE}{by} (waited "
                            f"{self.lock_timeout:.0f}s); try again when it is done"
                        ) from exc
                    hint = ""
                    if "failed to read WAL entry" in str(exc):
                        hint = " (`flexmatch doctor --fix` repairs a log entry it cannot read)"
                    raise StoreError(f"cannot open the store at {self.path}: {exc}{hint}") from exc
        return self._shard

    def _refuse_if_served(self) -> None:
        """Fail at once when ``flexmatch serve`` (another process) holds this store: it
        keeps it for as long as it runs, so waiting would only end in "in use"."""
        server = served_by(self.path)
        if server is None:
            return
        api = f"{server.url}/docs" if server.url else "its /docs page"
        raise StoreError(
            f"the store at {self.path} is held by `flexmatch serve` ({server.describe()}); "
            f"use its HTTP API instead ({api}: /v1/search, /v1/documents, /v1/stats), or stop "
            "the server first"
        )

    def prepare(self, embedding_model: str, dimension: int) -> None:
        if self._shard is None:
            self._refuse_if_served()  # before a store is created under a server's feet
        if self.exists():
            meta = self._meta()
            if meta.get("embedding_model") != embedding_model or meta.get("dimension") != dimension:
                raise ModelMismatchError(
                    mismatch_message(f"the store at {self.path}", meta, embedding_model, dimension)
                )
            self._open()
            return
        self._create(embedding_model, dimension)
        self._open()

    def _create(self, embedding_model: str, dimension: int) -> None:
        """Build the store aside and rename it into place, so a kill at any moment leaves
        either no store or a whole one; another process creating it at once wins cleanly."""
        private_folder(self.path.parent)  # made 700 if missing (.flexmatch by default)
        self._clear_interrupted_creation()
        staging = (
            self.path.parent / f".{self.path.name}.creating-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        )
        edge = _edge()
        config = edge.EdgeConfig(
            vectors={
                DENSE: edge.EdgeVectorParams(
                    size=dimension,
                    distance=edge.Distance.Cosine,
                    # half the disk of float32 (a store is mostly its vectors); a unit
                    # vector's components keep ~3 significant digits: squad-dev's
                    # nDCG@10 is the same to 4 decimals (docs/benchmarks.md)
                    datatype=edge.VectorStorageDatatype.Float16,
                )
            },
            sparse_vectors={LEXICAL: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
            optimizers=edge.EdgeOptimizersConfig(indexing_threshold=self.indexing_threshold_kb),
        )
        try:
            staging.mkdir(mode=0o700)
            shard = edge.EdgeShard.create(str(staging / "shard"), config)
            for field in INDEXED_FIELDS:
                shard.update(
                    edge.UpdateOperation.create_field_index(field, edge.PayloadSchemaType.Keyword)
                )
            shard.flush()
            shard.close()
            meta = {"embedding_model": embedding_model, "dimension": dimension}
            meta["schema"] = SCHEMA_VERSION
            (staging / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
            _restrict(staging)  # before it is in place: never readable by others there
            try:
                os.rename(staging, self.path)  # atomic; refused if the store appeared meanwhile
            except OSError:
                if not self.exists():
                    raise
        except Exception as exc:
            raise StoreError(f"cannot create a store at {self.path}: {exc}") from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _clear_interrupted_creation(self) -> None:
        """Remove what a creation killed before it finished left behind: a store folder
        with a shard but no metadata (nothing can have been committed to it), and staging
        folders of processes that no longer run."""
        for leftover in self.path.parent.glob(f".{self.path.name}.creating-*"):
            pid = leftover.name.rsplit("creating-", 1)[1].split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(leftover, ignore_errors=True)
        if self.path.is_dir() and not self.exists():
            contents = {p.name for p in self.path.iterdir()}
            if contents <= {"shard"}:
                shutil.rmtree(self.path)
            else:
                raise StoreError(
                    f"{self.path} is not a FlexMatch store and is not empty; "
                    "point store.path at a new folder"
                )

    def close(self) -> None:
        self._closed = True
        if self._shard is not None:
            if self.on_hold is not None:
                self.on_hold(False)
            self._shard.flush()
            self._shard.close()
            self._shard = None
            with contextlib.suppress(OSError):  # the files the engine wrote meanwhile
                _restrict(self.path)

    def size_bytes(self) -> int | None:
        """Bytes the store really takes on disk (its files are sparse: their apparent size
        can be hundreds of times larger)."""
        if not self.path.exists():
            return 0
        return sum(disk_bytes(p) for p in self.path.rglob("*") if p.is_file())

    # -- data ------------------------------------------------------------------------
    def _filter(self, tenant: str, filters: Filters | None, must_not: Filters | None = None) -> Any:
        must, negated = scoped_conditions(tenant, filters, must_not)
        excluded = [_condition(k, v) for k, v in negated]
        if self._unreadable:
            excluded.append(_edge().HasIdCondition(set(self._unreadable)))
        return _edge().Filter(must=[_condition(k, v) for k, v in must], must_not=excluded or None)

    def _update(self, operation: Any, what: str) -> None:
        try:
            self._open().update(operation)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"{what} in the store at {self.path} failed: {exc}") from exc

    def upsert(self, tenant: str, points: list[StoredPoint]) -> None:
        if not points:
            return
        check_points(points)
        edge = _edge()
        batch = []
        for point in points:
            vectors: dict[str, Any] = {}
            if point.vector is not None:
                vectors = {DENSE: point.vector, LEXICAL: lexical_document(point.text)}
            batch.append(edge.Point(point.id, vectors, {**point.payload, "tenant": tenant}))
        self._update(edge.UpdateOperation.upsert_points(batch), f"writing {len(batch)} points")

    def delete(self, tenant: str, filters: Filters, must_not: Filters | None = None) -> None:
        if not self.exists():
            return
        delete = _edge().UpdateOperation.delete_points_by_filter
        try:
            self._update(delete(self._filter(tenant, filters, must_not)), "deleting points")
        except StoreError as exc:
            if not unreadable_payload(exc):
                raise
            self._delete_around_unreadable(tenant, filters, must_not)

    def _delete_around_unreadable(
        self, tenant: str, filters: Filters, must_not: Filters | None
    ) -> None:
        """A delete reached a point whose payload cannot be decoded: the engine refuses
        every write until the store is reopened. Reopen it, find the unreadable points
        among those the delete matches, and delete the rest."""
        with self._opening:
            if self._shard is not None:
                with contextlib.suppress(Exception):  # refused writes: nothing to flush
                    self._shard.close()
                self._shard = None
        shard = self._open()
        matched = all_point_ids(shard, self._filter(tenant, filters, must_not))
        self._skip(read_payloads(shard, matched)[1])
        delete = _edge().UpdateOperation.delete_points_by_filter
        self._update(delete(self._filter(tenant, filters, must_not)), "deleting points")

    def _query_batch(
        self, tenant: str, queries: list[tuple[Any, str, int, Scope, list[str] | None]]
    ) -> list[list[Hit]]:
        if not self.exists():
            return [[] for _ in queries]
        edge = _edge()
        requests = self._requests(tenant, queries, payloads=True)
        try:
            batches = self._open().query_batch(edge.QueryBatchRequest(requests))
        except StoreError:
            raise
        except Exception as exc:
            if unreadable_payload(exc):
                return self._query_around_unreadable(tenant, queries)
            raise StoreError(f"searching the store at {self.path} failed: {exc}") from exc
        return [
            [Hit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {})) for p in points]
            for points in batches
        ]

    def _requests(self, tenant: str, queries: list[Query], payloads: bool) -> list[Any]:
        edge = _edge()
        return [
            edge.QueryRequest(
                limit=limit,
                query=edge.Query.Nearest(query, using=using),
                filter=self._filter(tenant, *scope),
                with_payload=(True if fields is None else (fields or False)) if payloads else False,
            )
            for query, using, limit, scope, fields in queries
        ]

    def _query_around_unreadable(self, tenant: str, queries: list[Query]) -> list[list[Hit]]:
        """The batch again without payloads, then the payloads of its hits apart: hits
        whose payload cannot be decoded are left out."""
        shard = self._open()
        requests = self._requests(tenant, queries, payloads=False)
        try:
            batches = shard.query_batch(_edge().QueryBatchRequest(requests))
        except Exception as exc:
            raise StoreError(f"searching the store at {self.path} failed: {exc}") from exc
        ids = list({str(p.id): p.id for points in batches for p in points}.values())
        found, bad = read_payloads(shard, ids)
        self._skip(bad)
        results: list[list[Hit]] = []
        for (*_, fields), points in zip(queries, batches, strict=True):
            hits = []
            for p in points:
                payload = found.get(str(p.id))
                if payload is None:
                    continue
                if fields is not None:
                    payload = {k: payload[k] for k in fields if k in payload}
                hits.append(Hit(id=str(p.id), score=float(p.score), payload=payload))
            results.append(hits)
        return results

    def optimize(self, min_points: int) -> bool:
        """Qdrant's optimizers, run in-process: they build HNSW for the segments past the
        indexing threshold and merge small ones. Below ``min_points`` exact search is fast
        and the build would cost more than it saves."""
        if not self.exists():
            return False
        shard = self._open()
        if shard.info().points_count < min_points:
            return False
        try:
            return bool(shard.optimize())
        except Exception as exc:
            raise StoreError(f"indexing the store at {self.path} failed: {exc}") from exc

    def retrieve(self, tenant: str, ids: list[str]) -> list[Hit]:
        if not self.exists() or not ids:
            return []
        ids = [i for i in ids if i not in self._unreadable]
        shard = self._open()
        try:
            records = shard.retrieve(ids, True, False)
        except Exception as exc:
            if not unreadable_payload(exc):
                raise
            found, bad = read_payloads(shard, ids)
            self._skip(bad)
            return in_tenant(tenant, [Hit(id=i, payload=p) for i, p in found.items()])
        return in_tenant(tenant, [Hit(id=str(r.id), payload=dict(r.payload)) for r in records])

    def scroll(
        self, tenant: str, filters: Filters | None = None, limit: int = 100_000
    ) -> list[Hit]:
        if not self.exists():
            return []
        edge = _edge()
        hits: list[Hit] = []
        offset: Any = None
        while len(hits) < limit:
            page = min(1000, limit - len(hits))
            request = edge.ScrollRequest(
                offset=offset, limit=page, filter=self._filter(tenant, filters), with_payload=True
            )
            shard = self._open()
            try:
                records, next_offset = shard.scroll(request)
                hits.extend(Hit(id=str(r.id), payload=dict(r.payload)) for r in records)
            except Exception as exc:
                if not unreadable_payload(exc):
                    raise
                request = edge.ScrollRequest(
                    offset=offset,
                    limit=page,
                    filter=self._filter(tenant, filters),
                    with_payload=False,
                )
                records, next_offset = shard.scroll(request)  # ids only: then payloads apart
                found, bad = read_payloads(shard, [r.id for r in records])
                self._skip(bad)
                hits.extend(Hit(id=i, payload=p) for i, p in found.items())
            offset = next_offset
            if offset is None or not records:
                break
        return in_tenant(tenant, hits)

    def scroll_vectors(
        self,
        tenant: str,
        filters: Filters | None = None,
        limit: int = 100_000,
        fields: tuple[str, ...] | None = None,
    ) -> list[tuple[Hit, list[float]]]:
        if not self.exists():
            return []
        payload: bool | list[str] = True if fields is None else [*fields, "tenant"]
        edge = _edge()
        found: list[tuple[Hit, list[float]]] = []
        offset: Any = None
        while len(found) < limit:
            request = edge.ScrollRequest(
                offset=offset,
                limit=min(1000, limit - len(found)),
                filter=self._filter(tenant, filters),
                with_payload=payload,
                with_vector=[DENSE],
            )
            records, offset = self._open().scroll(request)
            for r in records:
                vector = (r.vector or {}).get(DENSE)
                if isinstance(vector, list) and r.payload.get("tenant") == tenant:
                    found.append((Hit(id=str(r.id), payload=dict(r.payload)), vector))
            if offset is None or not records:
                break
        return found

    def set_payload(self, tenant: str, filters: Filters, payload: dict[str, Any]) -> None:
        check_payload(payload, "payload update")
        edge = _edge()
        if ACCESS_FIELD in payload and not self._access_indexed:
            # a store made before access control has no index on it yet (idempotent)
            index = edge.UpdateOperation.create_field_index
            self._update(index(ACCESS_FIELD, edge.PayloadSchemaType.Keyword), "indexing access")
            self._access_indexed = True
        operation = edge.UpdateOperation.set_payload_by_filter(
            self._filter(tenant, filters), payload
        )
        self._update(operation, "updating payloads")

    def count(self, tenant: str, filters: Filters | None = None) -> int:
        if not self.exists():
            return 0
        request = _edge().CountRequest(exact=True, filter=self._filter(tenant, filters))
        return int(self._open().count(request))
