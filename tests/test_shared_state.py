"""The state replicas share (keys, job records, cache generations), in the default SQLite
file, in a SQLite file by SQLAlchemy URL and on a real PostgreSQL server (the one
``scripts/postgres`` runs; those cases skip without it): two ``SharedState`` objects over
one database stand for two replicas, and each sees what the other wrote, at once."""

from __future__ import annotations

import multiprocessing
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest

from flexmatch import ConfigError, KeyRequestError, StoreError
from flexmatch.adapters.http.jobs import JobRegistry
from flexmatch.adapters.http.writes import TenantWriter
from flexmatch.service import JobRecord, KeyStore, SharedState
from flexmatch.service.state_db import (
    CONNECT_TIMEOUT,
    SqlAlchemyDatabase,
    SqliteDatabase,
    open_database,
)
from tests.conftest import REPO, write_config
from tests.state_workers import SHARED_JOB, create_tables_at, write_concurrently

Open = Callable[[], SharedState]


@pytest.fixture(params=["default", "url", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """``service.state_url``: None (the default file in ``tmp_path``), a SQLite file by
    URL, or a fresh database on the test PostgreSQL server."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return None if request.param == "default" else f"sqlite:///{tmp_path / 'state.db'}"


@pytest.fixture
def replicas(url: str | None, tmp_path: Path) -> Iterator[Open]:
    """A factory of replicas' views of one state database."""
    opened: list[SharedState] = []

    def open_replica() -> SharedState:
        opened.append(SharedState(open_database(tmp_path, url)))
        return opened[-1]

    yield open_replica
    for state in opened:  # the database is dropped next: let go of it
        state.close()


def test_a_key_made_or_revoked_by_one_replica_holds_for_the_other(replicas: Open) -> None:
    a, b = replicas(), replicas()
    key, token = a.keys.create("acme", "read,write", "bot")
    seen = b.keys.verify(token)
    assert seen is not None and seen.tenant == "acme" and seen.permissions == ["read", "write"]
    other, _ = b.keys.create("acme", "admin")
    assert [k.id for k in a.keys.list("acme")] == [key.id, other.id]  # oldest first
    assert b.keys.revoke(key.id, tenant="acme")
    assert a.keys.verify(token) is None  # no cache outlives the revocation
    revoked = a.keys.get(key.id)
    assert revoked is not None and revoked.revoked and revoked.revoked_at


def test_the_active_key_cap_holds_across_replicas(replicas: Open) -> None:
    """One statement counts and inserts, on SQLite and PostgreSQL alike."""
    a, b = replicas(), replicas()
    a.keys.max_active = b.keys.max_active = 2
    first, _ = a.keys.create("acme", "read")
    b.keys.create("acme", "read")
    with pytest.raises(KeyRequestError, match="'acme' already has 2 active keys"):
        a.keys.create("acme", "read")
    b.keys.create("other", "read")
    assert b.keys.revoke(first.id)
    a.keys.create("acme", "read")
    assert len(b.keys.list("acme")) == 3


def test_a_write_counted_by_one_replica_is_seen_by_the_other(replicas: Open) -> None:
    a, b = replicas(), replicas()
    assert a.generations.current("acme") == 0
    b.generations.bump("acme")
    b.generations.bump("acme")
    a.generations.bump("other")
    assert a.generations.current("acme") == 2 and b.generations.current("other") == 1


def _record(job_id: str, tenant: str = "acme", at: int = 1, status: str = "queued") -> JobRecord:
    return JobRecord(
        id=job_id, tenant=tenant, status=status, created_ns=at, heartbeat_ns=at, body={"n": 0}
    )


def test_job_records_are_shared_scoped_and_pruned(replicas: Open) -> None:
    a, b = replicas(), replicas()
    a.jobs.create(_record("j1", at=1))
    assert a.jobs.save("j1", "running", {"n": 1}, 5, [(0, {"doc": "x"})])
    assert a.jobs.save("j1", "running", {"n": 2}, 6, [(1, {"doc": "y"})])
    seen = b.jobs.get("acme", "j1")
    assert seen is not None and seen.status == "running" and seen.heartbeat_ns == 6
    assert seen.body == {"n": 2} and seen.documents == [{"doc": "x"}, {"doc": "y"}]
    assert b.jobs.get("other", "j1") is None  # another tenant's job does not exist
    assert a.jobs.save("j1", "done", {"n": 3}, 7)
    assert not a.jobs.save("j1", "running", {"n": 4}, 8)  # a finished job stays finished
    b.jobs.create(_record("j2", at=2))
    b.jobs.create(_record("j3", tenant="other", at=3, status="running"))
    assert [r.id for r in a.jobs.list("acme", 10)] == ["j2", "j1"]  # newest first
    assert a.jobs.list("acme", 10)[1].documents == [{"doc": "x"}, {"doc": "y"}]
    assert b.jobs.prune(keep=2) == 1  # the oldest finished one; live ones stay
    assert a.jobs.get("acme", "j1") is None and a.jobs.get("acme", "j2") is not None
    assert b.jobs.prune(keep=0) == 0


def test_a_lost_job_is_declared_failed_once_unless_it_beat(replicas: Open) -> None:
    a, b = replicas(), replicas()
    a.jobs.create(_record("j1", at=1, status="running"))
    stale = b.jobs.get("acme", "j1")
    assert stale is not None
    a.jobs.save("j1", "running", {"n": 1}, 2)  # it beat after b read it
    assert not b.jobs.declare_lost(stale, {"error": "lost"})
    fresh = b.jobs.get("acme", "j1")
    assert fresh is not None and b.jobs.declare_lost(fresh, {"error": "lost"})
    after = a.jobs.get("acme", "j1")
    assert after is not None and after.status == "failed" and after.body == {"error": "lost"}
    assert not a.jobs.save("j1", "running", {"n": 2}, 3)  # the owner learns it was declared


def test_concurrent_writers_from_several_processes_lose_nothing(
    replicas: Open, url: str | None, tmp_path: Path
) -> None:
    """3 processes of 4 threads each make 15 keys, 15 generation bumps, 15 outcomes of
    one shared job and 15 saves of a job of their own: every one of them is there after."""
    state = replicas()
    state.jobs.create(_record(SHARED_JOB, status="running"))
    processes, threads, each = 3, 4, 15
    spawn = multiprocessing.get_context("spawn")  # no inherited pools or locks
    with ProcessPoolExecutor(processes, mp_context=spawn) as pool:
        runs = [
            pool.submit(write_concurrently, str(tmp_path), url, worker, threads, each)
            for worker in range(processes)
        ]
        for run in runs:
            run.result(timeout=240)
    writers = processes * threads
    other = replicas()
    keys = other.keys.list("acme")
    assert len(keys) == writers * each and len({k.id for k in keys}) == writers * each
    assert other.generations.current("acme") == writers * each
    shared = other.jobs.get("acme", SHARED_JOB)
    assert shared is not None and len(shared.documents) == writers * each
    for worker in range(processes):
        for thread in range(threads):
            own = other.jobs.get("acme", f"w{worker}t{thread}")
            assert own is not None and own.body == {"n": each}


def test_a_new_file_opened_by_many_processes_and_threads_at_once(tmp_path: Path) -> None:
    """Replicas starting together on a KB with no state file yet: 4 processes of 8 threads
    each open it at the same instant, one of them turns it to WAL mode and makes the
    tables, and every thread writes (SQLite refuses the journal-mode switch at once, with
    no busy wait, while another connection is making it). Three fresh files."""
    processes, threads = 4, 8
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(processes, mp_context=spawn) as pool:
        list(pool.map(abs, range(processes)))  # the processes are up before the race
        for round_ in range(3):
            kb = tmp_path / f"kb{round_}"
            at = time.time() + 0.5
            starts = [
                pool.submit(create_tables_at, str(kb), None, at, threads) for _ in range(processes)
            ]
            for start in starts:
                start.result(timeout=120)
            state = SharedState(open_database(kb))
            assert len(state.keys.list("acme")) == processes * threads
            state.close()


def test_the_default_file_is_the_old_keys_file_and_old_keys_still_work(tmp_path: Path) -> None:
    path = tmp_path / ".flexmatch" / "keys.sqlite"
    path.parent.mkdir()
    old = KeyStore(path)
    key, token = old.create("acme", "read")
    # a keys file as the previous release wrote it: only its table, no other
    with sqlite3.connect(path) as db:
        for table in ("jobs", "job_documents", "cache_generations"):
            db.execute(f"DROP TABLE {table}")
    state = SharedState.for_kb(tmp_path)
    assert state.keys.path == path and stat.S_IMODE(path.stat().st_mode) == 0o600
    verified = state.keys.verify(token)
    assert verified is not None and verified.id == key.id
    state.generations.bump("acme")  # the new tables appear beside the old one
    assert state.generations.current("acme") == 1
    # the same file reached by URL (one machine's replicas may name it so)
    by_url = SharedState(SqlAlchemyDatabase(f"sqlite:///{path}"))
    assert [k.id for k in by_url.keys.list()] == [key.id]
    assert by_url.keys.verify(token) is not None and by_url.generations.current("acme") == 1


def test_reading_creates_nothing(tmp_path: Path) -> None:
    state = SharedState.for_kb(tmp_path)
    assert state.keys.verify("fm_0123456789ab_x") is None and state.keys.list() == []
    assert state.jobs.get("acme", "j") is None and state.generations.current("acme") == 0
    assert not (tmp_path / ".flexmatch").exists()


def test_the_config_names_the_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared.db"
    write_config(tmp_path / "kb", "service:\n  state_url: sqlite:///${STATE}\n")
    monkeypatch.setenv("STATE", str(shared))
    # the keys CLI and the server read the same setting
    keys = KeyStore.for_kb(tmp_path / "kb")
    state = SharedState.for_kb(tmp_path / "kb")
    assert keys.path is None and isinstance(keys.database, SqlAlchemyDatabase)
    _, token = keys.create("acme", "read")
    assert state.keys.verify(token) is not None and shared.exists()
    assert not (tmp_path / "kb" / ".flexmatch").exists()
    default = SharedState.for_kb(tmp_path / "elsewhere")
    assert isinstance(default.database, SqliteDatabase)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "service.state_url is not a database URL"),
        ("sqlite://", "in-memory database, which no other process can see"),
        ("sqlite:///:memory:", "in-memory database"),
        ("postgresql+pg8000://u:secret@db/x", "needs a database driver that is not installed"),
        ("mysql+pymysql://u:secret@db/x", "needs a database driver that is not installed"),
    ],
)
def test_bad_urls_are_refused_clearly(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        open_database(".", url)
    assert "secret" not in str(raised.value)


def test_a_postgresql_url_without_a_driver_means_psycopg() -> None:
    database = open_database(".", "postgresql://u:secret@db.invalid/x")
    assert database.location == "postgresql+psycopg://u:***@db.invalid/x"


def test_an_unreachable_database_is_a_store_error(tmp_path: Path) -> None:
    state = SharedState(open_database(tmp_path, f"sqlite:///{tmp_path / 'no' / 'such' / 'x.db'}"))
    with pytest.raises(StoreError) as raised:
        state.check()
    location = f"sqlite:///{tmp_path / 'no' / 'such' / 'x.db'}"
    # the driver's own words, as they are (no quotes, no traceback)
    assert str(raised.value) == (
        f"the service state database ({location}) failed: unable to open database file"
    )
    with pytest.raises(StoreError):
        state.keys.verify("fm_0123456789ab_x")


def test_a_replica_killed_mid_job_leaves_its_job_failed_for_the_others(
    url: str | None, tmp_path: Path
) -> None:
    """A real process runs a job (one document done, the next hanging) and is killed with
    SIGKILL; another replica marks the job failed once its heartbeat is stale, keeping the
    outcome of the document it finished."""
    command = [sys.executable, "-m", "tests.state_workers", "job", str(tmp_path), url or ""]
    runner = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert runner.stdout is not None
        job_id = runner.stdout.readline().strip()
        assert job_id, "the replica did not start its job"
        state = SharedState(open_database(tmp_path, url))
        deadline = time.monotonic() + 30
        while True:  # its first document is done and recorded, the second hangs
            record = state.jobs.get("acme", job_id)
            if record is not None and record.status == "running" and record.documents:
                break
            assert time.monotonic() < deadline, record
            time.sleep(0.05)
    finally:
        runner.kill()  # SIGKILL: nothing of it runs afterwards
        runner.wait(timeout=30)
    other = JobRegistry(
        kb=cast(Any, None),
        writer=TenantWriter(),
        ready=cast(Any, None),
        shared=state,
        lost_after=2.0,
    )
    seen = other.get("acme", job_id)
    assert seen is not None and seen.status == "running"  # its last beat is recent
    deadline = time.monotonic() + 15
    while (seen := other.get("acme", job_id)) is not None and seen.status == "running":
        assert time.monotonic() < deadline, "the dead replica's job stayed running"
        time.sleep(0.2)
    assert seen is not None and seen.status == "failed" and seen.finished_at
    assert "the server running this job stopped" in (seen.error or "")
    assert [d.input for d in seen.documents] == ["first.md"]
    stored = SharedState(open_database(tmp_path, url)).jobs.get("acme", job_id)
    assert stored is not None and stored.status == "failed"  # recorded for every replica
    state.close()


def test_a_server_that_never_answers_fails_within_the_connect_timeout(tmp_path: Path) -> None:
    """A port that accepts connections and says nothing (a hung or half-started server):
    the call fails after the connect timeout, naming the database, instead of waiting."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as silent:
        port = silent.getsockname()[1]
        state = SharedState(open_database(tmp_path, f"postgresql://u:pw@127.0.0.1:{port}/x"))
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"the service state database .*127\.0\.0\.1"):
            state.ping()
        took = time.monotonic() - started
    # never before the timeout; after it, a loaded machine's moment, never a second try
    # (two attempts would take twice the timeout)
    assert CONNECT_TIMEOUT - 1 <= took < 2 * CONNECT_TIMEOUT - 0.5, took


def test_a_state_file_removed_and_made_again_is_set_up_again(tmp_path: Path) -> None:
    """Closed, its file deleted (a reset), then used again: the new file gets its tables,
    whatever inode number the file system hands it."""
    state = SharedState(open_database(tmp_path))
    state.keys.create("acme", "read")
    state.close()
    for leftover in (tmp_path / ".flexmatch").glob("keys.sqlite*"):
        leftover.unlink()
    assert state.keys.list("acme") == []  # nothing there, and no "no such table"
    state.keys.create("acme", "read")
    assert len(state.keys.list("acme")) == 1
    state.close()
