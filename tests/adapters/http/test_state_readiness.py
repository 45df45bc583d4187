"""``/health/ready`` checks the store and the state database: while the database that holds
the keys and jobs is down, the server says it is not ready (naming that database), keyed
requests get a clear 503, and both recover by themselves when it is back. Run on the
default SQLite file and on the test PostgreSQL server (that case skips without it). A
store another process holds is not ready either, until it is let go."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from pathlib import Path

import httpx
import pytest

from flexmatch import KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import SharedState
from flexmatch.service.state_db import open_database
from flexmatch.testing import HashEmbedder
from tests.adapters.http.harness import KB_CONFIG
from tests.adapters.http.servers import UvicornThread, assert_error, auth
from tests.conftest import write_config
from tests.postgres import ensure_running, stop_server

BOUND = 10.0  # seconds an answer may take while the state database is down


def _ready(client: httpx.Client) -> httpx.Response:
    deadline = time.monotonic() + 60
    while (ready := client.get("/health/ready")).status_code != 200:
        assert time.monotonic() < deadline, ready.text
        time.sleep(0.05)
    return ready


@contextmanager
def _broken_sqlite(path: Path) -> Iterator[None]:
    """The state file unusable: a folder in its place (root ignores file permissions)."""
    away = path.with_name(path.name + ".away")
    path.rename(away)
    path.mkdir()
    try:
        yield
    finally:
        path.rmdir()
        away.rename(path)


@contextmanager
def _stopped_postgres() -> Iterator[None]:
    stop_server()
    try:
        yield
    finally:
        ensure_running()


@pytest.mark.parametrize("kind", ["default", "postgresql"])
def test_not_ready_while_the_state_database_is_down(
    kind: str, tmp_path: Path, embedder: OnnxEmbedder, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue("postgres_url")) if kind == "postgresql" else None
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, KB_CONFIG)
    shared = SharedState(open_database(kb_dir, url))
    _, token = shared.keys.create("acme", "read")
    path = shared.database.path
    outage: Callable[[], AbstractContextManager[None]] = _stopped_postgres
    if path is not None:
        assert path.is_file()
        outage = partial(_broken_sqlite, path)
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    app = create_app(kb, shared=shared, limits=Limits(rate_per_second=1_000, burst=1_000))
    try:
        with UvicornThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            ready = _ready(client)
            assert ready.json()["checks"] == {"store": True, "models": True, "state": True}
            assert client.get("/v1/stats", headers=auth(token)).status_code == 200

            with outage():
                started = time.monotonic()
                down = client.get("/health/ready")
                body = assert_error(down, 503, "not_ready")
                assert body["checks"] == {"store": True, "models": True, "state": False}
                message = body["error"]["message"]
                assert message.startswith(f"the service state database ({shared.location})")
                refused = assert_error(
                    client.get("/v1/stats", headers=auth(token)), 503, "store_unavailable"
                )
                assert "the service state database" in refused["error"]["message"]
                assert client.get("/health").status_code == 200  # alive, just not ready
                assert time.monotonic() - started < BOUND

            # back: ready again, with the same server and the same key
            assert _ready(client).json()["checks"]["state"] is True
            assert client.get("/v1/stats", headers=auth(token)).status_code == 200
    finally:
        kb.close()
        shared.close()


def test_not_ready_while_another_process_holds_the_store(tmp_path: Path) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, "store:\n  lock_timeout: 0.2\n")
    notes = tmp_path / "docs" / "notes.md"
    notes.parent.mkdir()
    notes.write_text("# Harbour\n\nThe harbour opens at dawn.\n", encoding="utf-8")
    holder = KnowledgeBase.open(kb_dir, embedder=HashEmbedder(), env={})
    holder.ingest([notes])  # and keeps the store open
    kb = KnowledgeBase.open(kb_dir, embedder=HashEmbedder(), env={})
    shared = SharedState(open_database(kb_dir, None))
    app = create_app(kb, shared=shared, limits=Limits(rate_per_second=1_000, burst=1_000))
    try:
        with UvicornThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            body = assert_error(client.get("/health/ready"), 503, "not_ready")
            assert body["checks"]["store"] is False
            assert "in use by another FlexMatch process" in body["error"]["message"]
            holder.close()
            assert _ready(client).json()["checks"] == {"store": True, "models": True, "state": True}
    finally:
        holder.close()
        kb.close()
        shared.close()
