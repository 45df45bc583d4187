"""``flexmatch doctor``: find, and with ``fix`` remove, what the embedded store cannot read.

Why: older versions let a payload nested deeper than the engine can decode into the store.
The engine accepts it, then fails every read that touches it, every delete that reaches
it, and, once the store is closed, opening it at all (its write-ahead log holds the
entry). Reads now skip such points (``EdgeStore``); this module takes them out for good:

1. the log (``wal``): each entry the engine cannot decode has its too-deep payload values
   replaced with a short text, so the store opens again; every other entry is kept;
2. the points: every point id is read without its payload, then the payloads in batches
   split in halves on failure, to find each point that cannot be read;
3. those points, and the points the repaired log entries wrote, are removed: their
   payload is overwritten with an empty one first (a delete of a point whose payload
   cannot be decoded fails and blocks the store's writes), then they are deleted.

Without ``fix`` nothing is changed (the check opens the store as any read does). With
it, the whole store folder is copied beside it first (``<store>.backup-<time>``), sparse
files kept sparse. Each removed point is reported with its tenant and document (read from
the payload index, which does not need the payload), so the documents can be ingested
again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, computed_field

from flexmatch.engine.stores import wal
from flexmatch.engine.stores.edge import (
    META_FILE,
    EdgeStore,
    _edge,
    all_point_ids,
    read_payloads,
)
from flexmatch.errors import StoreError

REMOVE_BATCH = 256


class LogProblem(BaseModel):
    """A log entry the engine cannot decode."""

    file: str
    index: int
    depth: int  # how deeply it nests (the engine reads at most wal.MAX_DEPTH)
    point_ids: list[str]
    repairable: bool
    reason: str = ""


class BadPoint(BaseModel):
    """A point to remove: its payload cannot be read, or an unreadable log entry wrote it."""

    id: str
    why: str  # "unreadable payload" or "written by an unreadable log entry"
    tenant: str | None = None
    document_id: str | None = None
    record: str | None = None


class DoctorReport(BaseModel):
    store: str
    log_entries: int = 0
    log_problems: list[LogProblem] = []
    points_checked: int | None = None  # None: the points could not be read yet
    bad_points: list[BadPoint] = []
    fixed: bool = False
    backup: str | None = None
    removed_points: int = 0
    notes: list[str] = []

    @computed_field  # type: ignore[prop-decorator]
    @property
    def healthy(self) -> bool:
        return not self.log_problems and not self.bad_points


def doctor_store(store_path: Path, *, fix: bool = False, backup: bool = True) -> DoctorReport:
    """Check the embedded store at ``store_path``; with ``fix``, repair it (see the module)."""
    if not (store_path / META_FILE).is_file():
        raise StoreError(f"no store at {store_path}: nothing to check")
    report = DoctorReport(store=str(store_path))
    log_dir = store_path / "shard" / "wal"
    with _exclusive(log_dir):
        scan = wal.scan(log_dir)
        report.log_entries = scan.entries
        report.log_problems = [LogProblem(**vars(bad)) for bad in scan.bad]
        if fix and scan.fixes:
            report.backup = _backup(store_path) if backup else None
            for log in scan.files:
                if log.path in scan.fixes:
                    wal.rewrite(log, scan.fixes[log.path], store_path)
    unrepairable = [p for p in report.log_problems if not p.repairable]
    if unrepairable:
        report.notes.append(
            f"{len(unrepairable)} log entr{'y' if len(unrepairable) == 1 else 'ies'} cannot "
            "be repaired here; restore a backup or re-ingest into a new knowledge base"
        )
        return report
    suspects = [i for p in report.log_problems for i in p.point_ids]
    try:
        _check_points(store_path, report, suspects, fix, backup)
    except StoreError as exc:
        if fix or "failed to read WAL entry" not in str(exc):
            raise
        report.notes.append("the points are checked once the log is repaired (run with --fix)")
        return report
    if fix:
        report.fixed = True
    return report


def _check_points(
    store_path: Path, report: DoctorReport, suspects: list[str], fix: bool, backup: bool
) -> None:
    store = EdgeStore(store_path)
    try:
        shard = store.engine()
        ids = all_point_ids(shard)
        report.points_checked = len(ids)
        _, unreadable = read_payloads(shard, ids)
        present = {str(i) for i in ids}
        why = dict.fromkeys(unreadable, "unreadable payload")
        for point in suspects:
            if point in present:
                why.setdefault(point, "written by an unreadable log entry")
        report.bad_points = [BadPoint(id=i, why=w, **_indexed(shard, i)) for i, w in why.items()]
        if not fix or not why:
            return
        if backup and report.backup is None:
            store.close()  # a quiet store to copy
            report.backup = _backup(store_path)
            store = EdgeStore(store_path)  # a closed store does not reopen itself
            shard = store.engine()
        _remove(shard, list(why))
        report.removed_points = len(why)
    finally:
        store.close()
    _verify(store_path)


def _indexed(shard: Any, point: str) -> dict[str, str | None]:
    """Tenant, document and record kind of a point, from the payload index (it answers
    where the payload itself cannot be decoded)."""
    edge = _edge()
    only = edge.Filter(must=[edge.HasIdCondition({point})])
    found: dict[str, str | None] = {}
    for key in ("tenant", "document_id", "record"):
        try:
            hits = list(shard.facet(edge.FacetRequest(key=key, limit=1, exact=True, filter=only)))
        except Exception:  # a store without that index: the report just lacks it
            hits = []
        found[key] = str(hits[0].value) if hits else None
    return found


def _remove(shard: Any, ids: list[str]) -> None:
    """Overwrite the payloads with empty ones, then delete: the delete of a point whose
    payload cannot be decoded would fail and block the store's writes."""
    edge = _edge()
    for start in range(0, len(ids), REMOVE_BATCH):
        batch = ids[start : start + REMOVE_BATCH]
        try:
            shard.update(edge.UpdateOperation.overwrite_payload(batch, {}))
            shard.update(edge.UpdateOperation.delete_points(batch))
        except Exception as exc:
            raise StoreError(f"removing unreadable points failed: {exc}") from exc
    shard.flush()


def _verify(store_path: Path) -> None:
    """The store opens, and every payload in it reads."""
    store = EdgeStore(store_path)
    try:
        shard = store.engine()
        _, unreadable = read_payloads(shard, all_point_ids(shard))
    finally:
        store.close()
    if unreadable:
        raise StoreError(f"after the repair {len(unreadable)} point(s) still cannot be read")


@contextlib.contextmanager
def _exclusive(log_dir: Path) -> Iterator[None]:
    """The lock the engine takes on the log folder: no FlexMatch process (and no engine)
    has the store open while its files are read and rewritten."""
    try:
        handle = os.open(log_dir, os.O_RDONLY)
    except OSError as exc:
        raise StoreError(f"cannot read the store's log at {log_dir}: {exc}") from exc
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(
                f"the store at {log_dir.parent.parent} is in use by another FlexMatch "
                "process; stop it (serve, mcp, an ingest) and run the doctor again"
            ) from None
        yield
    finally:
        os.close(handle)  # releases the lock


def _backup(store_path: Path) -> str:
    """A copy of the whole store beside it, holes of sparse files kept as holes."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = store_path.with_name(f"{store_path.name}.backup-{stamp}")
    suffix = 1
    while target.exists():
        suffix += 1
        target = store_path.with_name(f"{store_path.name}.backup-{stamp}-{suffix}")
    try:
        shutil.copytree(store_path, target, copy_function=_copy_sparse)
        os.chmod(target, 0o700)
    except OSError as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise StoreError(f"cannot back up the store to {target}: {exc}; nothing changed") from exc
    return str(target)


def _copy_sparse(source: str, target: str) -> None:
    block = 1 << 20
    with open(source, "rb") as reader, open(target, "wb") as writer:
        os.fchmod(writer.fileno(), 0o600)
        while chunk := reader.read(block):
            if chunk.count(0) == len(chunk):
                writer.seek(len(chunk), os.SEEK_CUR)
            else:
                writer.write(chunk)
        writer.truncate()
    shutil.copymode(source, target)
