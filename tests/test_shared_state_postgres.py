"""The state database is a PostgreSQL server that restarts during a run: while it is down
every call fails at once with a ``StoreError`` naming the database (never a hang, never
its password), and when it is back the same objects work again, without a restart of
their own. Runs on the server ``scripts/postgres`` starts; skips without it."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import make_url

from flexmatch import JobRecord, SharedState, StoreError
from flexmatch.state_db import open_database
from tests.postgres import ensure_running, stop_server
from tests.state_workers import create_tables_at

OUTAGE_BOUND = 10.0  # seconds any call may take while the server is down


def _fails_fast(call: Callable[[], Any]) -> str:
    started = time.monotonic()
    with pytest.raises(StoreError) as raised:
        call()
    took = time.monotonic() - started
    assert took < OUTAGE_BOUND, f"{took:.1f} s to fail"
    return str(raised.value)


def test_a_restart_of_the_server_is_survived(postgres_url: str, tmp_path: Path) -> None:
    state = SharedState(open_database(tmp_path, postgres_url))
    key, token = state.keys.create("acme", "read")
    state.jobs.create(JobRecord("j1", "acme", "running", 1, 1, {"n": 0}))
    assert state.keys.verify(token) is not None  # the pool now holds a live connection
    secret = str(make_url(postgres_url).password)
    assert secret not in state.location

    stop_server()
    try:
        messages = [
            _fails_fast(lambda: state.keys.verify(token)),
            _fails_fast(lambda: state.jobs.save("j1", "running", {"n": 1}, 2)),
            _fails_fast(lambda: state.generations.bump("acme")),
            _fails_fast(state.ping),
            _fails_fast(lambda: SharedState(open_database(tmp_path, postgres_url)).check()),
        ]
        for message in messages:
            assert message.startswith(
                f"the service state database ({state.location}) failed: "
            ), message
            assert secret not in message and "Traceback" not in message
    finally:
        ensure_running()

    # the same objects, their pooled connections dead: pinged, replaced, and it works
    verified = state.keys.verify(token)
    assert verified is not None and verified.id == key.id
    assert state.jobs.save("j1", "running", {"n": 2}, 3)
    state.generations.bump("acme")
    assert state.generations.current("acme") == 1
    record = state.jobs.get("acme", "j1")
    assert record is not None and record.body == {"n": 2}  # the failed save left nothing

    # a restart between two calls is not even seen: the dropped connection is pinged first
    stop_server()
    ensure_running()
    assert state.keys.verify(token) is not None
    state.close()


def test_replicas_starting_together_all_create_the_tables(postgres_url: str) -> None:
    """Six processes reach a new database at the same instant, three times over: each
    creates the tables or finds them made, and every one then writes (unguarded, two
    concurrent CREATE TABLEs collide in PostgreSQL's catalog: a duplicate-key error)."""
    base = make_url(postgres_url)
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    replicas = 6
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(replicas, mp_context=spawn) as pool:
        list(pool.map(abs, range(replicas)))  # the processes are up before the race
        for round_ in range(3):
            name = f"{base.database}_start{round_}"
            with admin.connect() as connection:
                connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
            url = base.set(database=name).render_as_string(hide_password=False)
            try:
                at = time.time() + 0.5
                starts = [
                    pool.submit(create_tables_at, "/nonexistent", url, at)
                    for _ in range(replicas)
                ]
                for start in starts:
                    start.result(timeout=120)
                state = SharedState(open_database(".", url))
                assert len(state.keys.list("acme")) == replicas
                state.close()
            finally:
                with admin.connect() as connection:
                    connection.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    admin.dispose()
