"""A store that already holds a point it cannot read is not bricked: reads skip the point
and say so, and ``flexmatch doctor --fix`` repairs the log and removes such points while
every other point stays. The bad points are written the way older versions let them in:
straight through the engine, past the payload checks of today's writers."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from flexmatch import StoreError
from flexmatch.engine.stores import wal
from flexmatch.engine.stores.base import Search, StoredPoint, lexical_document
from flexmatch.engine.stores.edge import EdgeStore, _edge
from flexmatch.engine.stores.repair import doctor_store as doctor
from tests.conftest import run

TENANT = "default"
BAD = "0d3c7a52-5b1e-4b7e-9e47-3f6f0f1d2c11"


def nest(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"k": value}
    return value


def good_point(n: int) -> StoredPoint:
    return StoredPoint(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"good-{n}")),
        vector=[1.0, float(n), 0.0, 0.0],
        text=f"hello number {n}",
        payload={"record": "match", "document_id": f"good-{n}", "n": n, "nested": nest(20)},
    )


def raw_points(points: list[StoredPoint], bad: dict[str, Any]) -> list[Any]:
    """Engine points for ``points`` plus, in their middle, one with payload ``bad``, written
    as an older version did (no check)."""
    edge = _edge()
    made = [
        edge.Point(
            p.id,
            {"dense": p.vector, "lexical": lexical_document(p.text)},
            {**p.payload, "tenant": TENANT},
        )
        for p in points
    ]
    vectors = {"dense": [1.0, 0.0, 0.0, 0.0], "lexical": lexical_document("hello deep")}
    bad_point = edge.Point(bad["id"], vectors, bad["payload"])
    return [*made[: len(made) // 2], bad_point, *made[len(made) // 2 :]]


def bad_payload(levels: int = 400) -> dict[str, Any]:
    return {"record": "match", "document_id": "deep", "tenant": TENANT, "extra": nest(levels)}


def poisoned_store(
    path: Path, levels: int = 400, killed: bool = False, child: bool = False
) -> list[StoredPoint]:
    """Good points in an entry before and in the same entry as one unreadable point
    (``BAD``). Closed the usual way, the bad entry is the log's last (the engine keeps
    the last entry unacknowledged, so it is decoded at the next open) and the segments
    hold the point too. ``killed``: more good points in later entries, then the process
    dies before any flush, so the log holds them all."""
    if killed and not child:
        script = (
            "from pathlib import Path; "
            "from tests.engine.stores.test_repair import poisoned_store as p; "
            f"p(Path({str(path)!r}), {levels}, killed=True, child=True)"
        )
        subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
        return [good_point(n) for n in range(12)]
    store = EdgeStore(path)
    store.prepare("test-model", 4)
    goods = [good_point(n) for n in range(12)]
    store.upsert(TENANT, goods[:3])
    batch = raw_points(goods[3:8], {"id": BAD, "payload": bad_payload(levels)})
    store.engine().update(_edge().UpdateOperation.upsert_points(batch))
    if not killed:
        store.close()
        return goods[:8]
    store.upsert(TENANT, goods[8:10])
    store.upsert(TENANT, goods[10:])
    os._exit(0)  # no flush, no close


def payloads(path: Path) -> dict[str, dict[str, Any]]:
    store = EdgeStore(path)
    try:
        return {hit.id: hit.payload for hit in store.scroll(TENANT)}
    finally:
        store.close()


def expected(goods: list[StoredPoint]) -> dict[str, dict[str, Any]]:
    return {p.id: {**p.payload, "tenant": TENANT} for p in goods}


# -- the log --------------------------------------------------------------------------


@pytest.mark.parametrize(("levels", "readable"), [(100, True), (123, False)])
def test_the_scan_flags_the_entries_the_engine_cannot_read(
    tmp_path: Path, levels: int, readable: bool
) -> None:
    """An entry nesting 128 levels in all (123 under a point's payload key) no longer
    opens, and the scan flags it; a deep one that still opens is left alone."""
    goods = poisoned_store(tmp_path / "s", levels)
    found = wal.scan(tmp_path / "s" / "shard" / "wal").bad
    assert (found == []) is readable
    if readable:
        assert len(payloads(tmp_path / "s")) == len(goods) + 1
    else:
        with pytest.raises(StoreError, match="doctor --fix"):
            EdgeStore(tmp_path / "s").count(TENANT)


def test_the_rewrite_changes_only_the_bad_entry_and_keeps_checksums_valid(tmp_path: Path) -> None:
    poisoned_store(tmp_path / "s", killed=True)
    folder = tmp_path / "s" / "shard" / "wal"
    before = wal.scan(folder)
    [entry] = before.bad
    assert entry.repairable and entry.point_ids == [BAD] and entry.depth > wal.MAX_DEPTH
    for log in before.files:
        if log.path in before.fixes:
            wal.rewrite(log, before.fixes[log.path], tmp_path)
    after = wal.scan(folder)
    assert after.bad == [] and after.entries == before.entries  # every CRC still chains
    old = [(f.first_index + e.position, e.data) for f in before.files for e in f.entries]
    new = [(f.first_index + e.position, e.data) for f in after.files for e in f.entries]
    changed = [i for (i, a), (_, b) in zip(old, new, strict=True) if a != b]
    assert changed == [entry.index]
    fixed = dict(new)[entry.index]
    assert wal.REMOVED.encode() in fixed and b"good-" in fixed  # the batch's good points stay


def test_an_entry_nested_too_deeply_outside_any_payload_is_reported_not_touched() -> None:
    deep_filter = b"\xa1\x66filter" + b"\x81" * 200 + b"\x00"  # {"filter": [[[...0]]]}
    depth = wal.measure(deep_filter)
    assert depth.deepest == 201 and depth.cuts == []


# -- doctor ---------------------------------------------------------------------------


@pytest.mark.parametrize("killed", [False, True], ids=["closed", "killed"])
def test_doctor_repairs_a_bricked_store_and_keeps_every_good_point(
    tmp_path: Path, killed: bool
) -> None:
    store_path = tmp_path / "s"
    goods = poisoned_store(store_path, killed=killed)
    bad = BAD
    with pytest.raises(StoreError, match="doctor --fix"):
        EdgeStore(store_path).count(TENANT)

    report = doctor(store_path)  # a check changes nothing
    assert not report.healthy and not report.fixed and report.backup is None
    assert [p.point_ids for p in report.log_problems] == [[bad]]
    assert wal.scan(store_path / "shard" / "wal").bad != []

    report = doctor(store_path, fix=True)
    assert report.fixed and report.removed_points == 1
    [removed] = report.bad_points
    assert (removed.id, removed.tenant, removed.document_id) == (bad, TENANT, "deep")
    assert payloads(store_path) == expected(goods)

    store = EdgeStore(store_path)  # writes work again, and the store reopens after them
    more = good_point(99)
    store.upsert(TENANT, [more])
    store.close()
    assert payloads(store_path) == expected([*goods, more])
    assert doctor(store_path).healthy

    backup = Path(report.backup or "")
    assert backup.name.startswith("s.backup-")
    assert [b.point_ids for b in wal.scan(backup / "shard" / "wal").bad] == [[bad]]


def test_doctor_finds_a_point_only_the_segments_hold(tmp_path: Path) -> None:
    """Writes after the bad one, then a clean close: the log has moved past its entry (the
    store opens), but the segments hold the point, and every read that reaches it fails."""
    store_path = tmp_path / "s"
    store = EdgeStore(store_path)
    store.prepare("test-model", 4)
    goods = [good_point(n) for n in range(6)]
    batch = raw_points(goods[:3], {"id": BAD, "payload": bad_payload()})
    store.engine().update(_edge().UpdateOperation.upsert_points(batch))
    store.upsert(TENANT, goods[3:])
    store.close()

    report = doctor(store_path)  # the check reads the points, and changes nothing
    assert report.points_checked == 7 and [p.id for p in report.bad_points] == [BAD]
    assert report.bad_points[0].why == "unreadable payload" and not report.fixed
    store = EdgeStore(store_path)
    with pytest.raises(Exception, match="recursion limit"):
        store.engine().retrieve([BAD], True, False)
    store.close()
    report = doctor(store_path, fix=True)
    assert report.fixed and [p.id for p in report.bad_points] == [BAD]
    assert payloads(store_path) == expected(goods)


def long_log_store(path: Path, where: str) -> None:
    """Killed after 36 MB of writes: the log spans a closed segment file and an open one,
    and the bad entry is in the ``first`` or the ``second``."""
    store = EdgeStore(path)
    store.prepare("test-model", 4)
    batch = raw_points([good_point(0)], {"id": BAD, "payload": bad_payload()})
    if where == "first":
        store.engine().update(_edge().UpdateOperation.upsert_points(batch))
    for n in range(1, 37):
        store.upsert(TENANT, [filler(n)])
    if where == "second":
        store.engine().update(_edge().UpdateOperation.upsert_points(batch))
    store.upsert(TENANT, [good_point(99)])
    os._exit(0)


def filler(n: int) -> StoredPoint:
    point = good_point(n)
    point.payload["blob"] = "y" * 1_000_000
    return point


@pytest.mark.parametrize("where", ["first", "second"])
def test_doctor_repairs_a_log_that_spans_segment_files(tmp_path: Path, where: str) -> None:
    store_path = tmp_path / "s"
    script = (
        "from pathlib import Path; from tests.engine.stores.test_repair import long_log_store; "
        f"long_log_store(Path({str(store_path)!r}), {where!r})"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    scan = wal.scan(store_path / "shard" / "wal")
    assert [f.path.name for f in scan.files if f.entries] == ["closed-0", "open-2"]
    [entry] = scan.bad
    assert entry.file == ("closed-0" if where == "first" else "open-2")

    report = doctor(store_path, fix=True)
    assert [p.id for p in report.bad_points] == [BAD]
    goods = [good_point(0), *(filler(n) for n in range(1, 37)), good_point(99)]
    assert payloads(store_path) == expected(goods)


def test_doctor_on_a_healthy_store_says_so_and_changes_nothing(tmp_path: Path) -> None:
    store_path = tmp_path / "s"
    store = EdgeStore(store_path)
    store.prepare("test-model", 4)
    goods = [good_point(n) for n in range(5)]
    store.upsert(TENANT, goods)
    store.close()
    log = store_path / "shard" / "wal"
    files = {p: p.read_bytes() for p in log.iterdir()}
    report = doctor(store_path, fix=True)
    assert report.healthy and report.points_checked == 5
    assert report.backup is None and report.removed_points == 0
    # the log as it was (the segments get only what any open does: the engine's upkeep)
    assert {p: p.read_bytes() for p in log.iterdir()} == files
    assert payloads(store_path) == expected(goods)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # no backup


def test_doctor_refuses_a_store_in_use(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "s")
    store.prepare("test-model", 4)
    try:
        with pytest.raises(StoreError, match="in use by another FlexMatch process; stop it"):
            doctor(tmp_path / "s", fix=True)
    finally:
        store.close()


# -- reads that skip ------------------------------------------------------------------


def live_poisoned_store(path: Path) -> tuple[EdgeStore, list[StoredPoint], str]:
    """An open store whose segments hold an unreadable point (what a store repaired by
    an older doctor, or one never closed, reads from)."""
    store = EdgeStore(path)
    store.prepare("test-model", 4)
    goods = [good_point(n) for n in range(6)]
    bad = str(uuid.uuid4())
    store.upsert(TENANT, goods[:2])
    store.engine().update(
        _edge().UpdateOperation.upsert_points(
            raw_points(goods[2:], {"id": bad, "payload": bad_payload()})
        )
    )
    return store, goods, bad


@pytest.mark.parametrize("read", ["search", "scroll", "retrieve"])
def test_reads_skip_an_unreadable_point_and_say_to_run_the_doctor(
    tmp_path: Path, read: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, goods, bad = live_poisoned_store(tmp_path / "s")
    ids = {p.id for p in goods}
    with caplog.at_level(logging.WARNING, logger="flexmatch.store"):
        if read == "search":
            every, some = store.search_batch(
                TENANT,
                [Search(50, vector=[1.0, 0.0, 0.0, 0.0]), Search(50, text="hello", fields=("n",))],
            )
            assert {h.id for h in every} == ids and {h.id for h in some} == ids
            assert all(set(h.payload) == {"tenant", "n"} for h in some)
            assert all(h.score > 0 for h in every)
        elif read == "scroll":
            assert {h.id: h.payload for h in store.scroll(TENANT)} == expected(goods)
        else:
            hits = store.retrieve(TENANT, [bad, *ids])
            assert {h.id: h.payload for h in hits} == expected(goods)
    assert bad in caplog.text and "flexmatch doctor --fix" in caplog.text
    # known from now on: left out of counts and of deletes (which it would otherwise block)
    assert store.count(TENANT) == len(goods)
    store.delete(TENANT, {"document_id": goods[0].payload["document_id"]})
    store.upsert(TENANT, [good_point(7)])
    assert store.count(TENANT) == len(goods)
    store.close()


def test_a_delete_that_reaches_an_unreadable_point_deletes_the_rest(tmp_path: Path) -> None:
    """Before any read has met the point, a delete that matches it fails in the engine
    and blocks every later write; the store reopens itself and deletes the rest."""
    store_path = tmp_path / "s"
    store = EdgeStore(store_path)
    store.prepare("test-model", 4)
    goods = [good_point(n) for n in range(6)]
    for good in goods[:3]:
        good.payload["document_id"] = "deep"  # the same document as the bad point
    batch = raw_points(goods[:3], {"id": BAD, "payload": bad_payload()})
    store.engine().update(_edge().UpdateOperation.upsert_points(batch))
    store.upsert(TENANT, goods[3:])
    store.close()

    store = EdgeStore(store_path)
    more = good_point(50)
    store.delete(TENANT, {"document_id": "deep"})
    store.upsert(TENANT, [more])  # writes work again
    # the failed delete took the point out of the payload index: no filtered read sees it
    assert {h.id for h in store.scroll(TENANT)} == {p.id for p in [*goods[3:], more]}
    store.close()
    assert doctor(store_path, fix=True).removed_points == 1
    assert payloads(store_path) == expected([*goods[3:], more])


# -- the command ----------------------------------------------------------------------

CORPUS = [
    {"_id": "food", "title": "Kitchen", "text": "The location of food is the kitchen pantry."},
    {"_id": "tools", "title": "Shed", "text": "The hammer is kept in the shed by the garden."},
]


def test_flexmatch_doctor_unbricks_a_poisoned_knowledge_base(tmp_path: Path) -> None:
    """The poisoning of old: a document's pending record with metadata nested 400 levels
    deep made every command of its tenant fail and the store unopenable."""
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in CORPUS), encoding="utf-8")
    assert run("ingest", "--kb", str(kb), str(corpus)).returncode == 0

    store_path = kb / ".flexmatch" / "qdrant"
    store = EdgeStore(store_path)
    record = next(h for h in store.scroll(TENANT, {"record": "document"}))
    deep = {**record.payload, "document_id": "deep", "id": "deep", "status": "pending"}
    deep.update(pending_version="v1", unfinished="yes", metadata={"extra": nest(400)})
    bad = str(uuid.uuid4())
    store.engine().update(_edge().UpdateOperation.upsert_points([_edge().Point(bad, {}, deep)]))
    store.close()

    stats = run("stats", "--kb", str(kb))
    assert stats.returncode == 2 and "doctor --fix" in stats.stderr
    assert "Traceback" not in stats.stderr

    check = run("doctor", "--kb", str(kb))
    assert check.returncode == 1, check.stderr
    assert "1 unreadable" in check.stdout and "doctor --fix" in check.stdout

    fixed = run("doctor", "--kb", str(kb), "--fix", "--json")
    assert fixed.returncode == 0, fixed.stderr
    report = json.loads(fixed.stdout)
    assert report["fixed"] and report["removed_points"] == 1
    assert [(p["id"], p["document_id"]) for p in report["bad_points"]] == [(bad, "deep")]
    assert Path(report["backup"]).is_dir()

    again = run("doctor", "--kb", str(kb))
    assert again.returncode == 0 and "healthy" in again.stdout

    stats = json.loads(run("stats", "--kb", str(kb), "--json").stdout)
    assert stats["documents"] == 2 and stats["incomplete_documents"] == 0
    listed = json.loads(run("docs", "list", "--kb", str(kb), "--json").stdout)
    assert sorted(d["id"] for d in listed) == ["food", "tools"]
    answer = run("query", "--kb", str(kb), "--json", "where is the hammer kept")
    assert answer.returncode == 0 and "shed" in answer.stdout

    more = tmp_path / "more.md"
    more.write_text("# Garage\n\nThe bicycle stands in the garage.\n", encoding="utf-8")
    assert run("ingest", "--kb", str(kb), str(more)).returncode == 0
    listed = json.loads(run("docs", "list", "--kb", str(kb), "--json").stdout)
    assert len(listed) == 3
