"""The state database is a PostgreSQL server that restarts during a run: while it is down
every call fails at once with a ``StoreError`` naming the database (never a hang, never
its password), and when it is back the same objects work again, without a restart of
their own; a job running meanwhile finishes and its record catches up. Replicas that
start together all create the tables. Runs on the server ``scripts/postgres`` starts;
skips without it."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest
import sqlalchemy as sa
from sqlalchemy import make_url

from flexmatch import DocumentOutcome, IngestReport, StoreError
from flexmatch.adapters.http.jobs import JobRegistry, write_item
from flexmatch.adapters.http.writes import TenantWriter
from flexmatch.service import JobRecord, SharedState
from flexmatch.service.state_db import open_database
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
            assert message.startswith(f"the service state database ({state.location}) failed: "), (
                message
            )
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
                    pool.submit(create_tables_at, "/nonexistent", url, at) for _ in range(replicas)
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


def test_a_job_runs_on_through_a_restart_and_its_record_catches_up(
    postgres_url: str, tmp_path: Path
) -> None:
    """PostgreSQL stops between a job's first and second documents and starts again before
    its third: the job writes all three, and its record (read by another replica) ends
    done with every outcome, the one finished during the outage included."""
    state = SharedState(open_database(tmp_path, postgres_url))
    other = SharedState(open_database(tmp_path, postgres_url))
    gates = {name: asyncio.Event() for name in "abc"}
    written: list[str] = []

    def item(name: str) -> Any:
        async def write(tenant: str, progress: Any) -> IngestReport:
            await gates[name].wait()
            written.append(name)
            return IngestReport(outcomes=[DocumentOutcome(input=name, outcome="added")])

        return write_item(name, write)

    async def wait_for(condition: Callable[[], bool]) -> None:
        for _ in range(600):
            if condition():
                return
            await asyncio.sleep(0.05)
        raise AssertionError("timed out")

    async def scenario() -> str:
        async def ready() -> None:
            return None

        registry = JobRegistry(
            kb=cast(Any, None),
            writer=TenantWriter(),
            ready=ready,
            shared=state,
            heartbeat=0.1,
        )
        job = await registry.submit("acme", "upload", [item(n) for n in "abc"])

        def recorded() -> int:
            record = other.jobs.get("acme", job.id)
            return 0 if record is None else len(record.documents)

        gates["a"].set()
        await wait_for(lambda: recorded() == 1)
        await asyncio.to_thread(stop_server)
        try:
            gates["b"].set()  # finishes while the database is down: its save fails
            await wait_for(lambda: written == ["a", "b"])
            await asyncio.sleep(0.3)  # a few heartbeats fail too
        finally:
            await asyncio.to_thread(ensure_running)
        gates["c"].set()
        await wait_for(lambda: getattr(other.jobs.get("acme", job.id), "status", "") == "done")
        await registry.close()
        return job.id

    job_id = asyncio.run(scenario())
    record = other.jobs.get("acme", job_id)
    assert record is not None and record.status == "done", record
    assert [d["input"] for d in record.documents] == ["a", "b", "c"]
    state.close()
    other.close()
