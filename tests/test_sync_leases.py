"""Sync leases and last runs in the shared state database: of many replicas asking for a
source's lease at once exactly one gets it; its holder renews and releases it; once it
expires another may take it; a source's last run is kept per tenant. On SQLite here, and
on the PostgreSQL server ``scripts/postgres`` runs (skipped without it)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from flexmatch.service import SharedState, SyncRun, SyncState
from flexmatch.service.state_db import open_database

SECOND = 10**9


def leases_are_exclusive(syncs: SyncState, racers: int = 8) -> None:
    now = time.time_ns()
    start = threading.Barrier(racers)

    def take(index: int) -> bool:
        start.wait(10)
        return syncs.take("docs", "default", f"replica-{index}", now + 60 * SECOND, now)

    with ThreadPoolExecutor(racers) as pool:
        won = list(pool.map(take, range(racers)))
    assert won.count(True) == 1, won
    holder = f"replica-{won.index(True)}"
    lease = syncs.leases("default", now)["docs"]
    assert lease.holder == holder and lease.job_id == ""
    assert syncs.renew("docs", "default", holder, now + 120 * SECOND, "job1")
    assert syncs.leases("default", now)["docs"].job_id == "job1"
    assert not syncs.renew("docs", "default", "someone-else", now + 120 * SECOND)
    assert syncs.leases("other-tenant", now) == {}
    assert syncs.take("docs", "other-tenant", "replica-x", now + SECOND, now)  # its own

    # a holder that stopped renewing: its lease expires and another replica takes it
    later = now + 121 * SECOND
    assert syncs.leases("default", later) == {}
    assert syncs.take("docs", "default", "replica-late", later + 60 * SECOND, later)
    assert not syncs.renew("docs", "default", holder, later + 60 * SECOND)
    syncs.release("docs", "default", holder)  # not its lease any more: nothing happens
    assert syncs.leases("default", later)["docs"].holder == "replica-late"
    syncs.release("docs", "default", "replica-late")
    assert syncs.leases("default", later) == {}

    run = SyncRun(source="docs", tenant="default", job_id="job1", started_at="t0")
    syncs.record(run, now)
    run.outcome, run.added = "done", 3
    syncs.record(run, now)
    assert syncs.runs("default") == {"docs": (now, run)}
    assert syncs.runs("other-tenant") == {}


def test_sync_leases_on_sqlite(tmp_path: Path) -> None:
    shared = SharedState(open_database(tmp_path))
    try:
        assert shared.syncs.runs("default") == {}  # no file yet: nothing, and none made
        assert not (tmp_path / ".flexmatch").exists()
        leases_are_exclusive(shared.syncs)
    finally:
        shared.close()


def test_sync_leases_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    shared = SharedState(open_database(tmp_path, postgres_url))
    try:
        leases_are_exclusive(shared.syncs)
    finally:
        shared.close()
