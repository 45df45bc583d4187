"""The state database is a PostgreSQL server that restarts during a run: while it is down
every call fails at once with a ``StoreError`` naming the database (never a hang, never
its password), and when it is back the same objects work again, without a restart of
their own. Runs on the server ``scripts/postgres`` starts; skips without it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import make_url

from flexmatch import JobRecord, SharedState, StoreError
from flexmatch.state_db import open_database
from tests.postgres import ensure_running, stop_server

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
