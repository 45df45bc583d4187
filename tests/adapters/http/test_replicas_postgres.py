"""Two real ``flexmatch serve`` processes sharing a state database on a real PostgreSQL
server (the one ``scripts/postgres`` runs; skipped without it): a key made on one works on
the other and its revocation holds at once, a job accepted by one is polled on the other,
a write through one hides the other's cached answers, and a restart of PostgreSQL mid-run
gives clear 503s (never a hang) and is survived without restarting either replica. Each
replica has its own in-memory vector store, as in ``test_replicas``: the state is what is
shared."""

from __future__ import annotations

import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
from sqlalchemy import make_url

from tests.adapters.http.servers import assert_error, auth
from tests.adapters.http.test_replicas import (
    FLEXMATCH,
    _env,
    _serving,
    _upload,
    _wait_done,
    _wait_ready,
    keys_and_jobs_are_shared,
)
from tests.conftest import REPO, write_config
from tests.postgres import ensure_running, stop_server

BOUND = 10.0  # seconds an answer may take while PostgreSQL is down


def test_two_replicas_on_postgresql_share_state_and_survive_its_restart(
    postgres_url: str, tmp_path: Path
) -> None:
    kb_a, kb_b = tmp_path / "a", tmp_path / "b"
    for kb in (kb_a, kb_b):
        write_config(kb, f"store:\n  url: ':memory:'\nservice:\n  state_url: {postgres_url}\n")
    secret = str(make_url(postgres_url).password)
    made = subprocess.run(
        [str(FLEXMATCH), "keys", "create", "--kb", str(kb_b), "--permissions", "admin"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_env(),
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    admin = made.stdout.strip()
    assert not (kb_b / ".flexmatch").exists()  # the key is in PostgreSQL

    with ExitStack() as stack:
        (proc_a, url_a), (proc_b, url_b) = (
            stack.enter_context(_serving(kb)) for kb in (kb_a, kb_b)
        )
        a = stack.enter_context(httpx.Client(base_url=url_a, timeout=60))
        b = stack.enter_context(httpx.Client(base_url=url_b, timeout=60))
        _wait_ready(proc_a, a, tmp_path / "a.log")
        _wait_ready(proc_b, b, tmp_path / "b.log")

        token, job_id = keys_and_jobs_are_shared(a, b, admin)

        # A caches its answer; a write through B makes it unreachable on A
        def cached() -> str:
            query = {"query": "Where is the spare key?"}
            response = a.get("/v1/search", params=query, headers=auth(token))
            assert response.status_code == 200, response.text
            return response.headers["x-cache"]

        assert [cached(), cached()] == ["miss", "hit"]
        window = _upload(b, token, "window.md", "# Window\n\nThe window latch is loose.")
        assert _wait_done(a, window, token)["status"] == "done"
        assert [cached(), cached()] == ["miss", "hit"]

        # PostgreSQL stops: clear 503s from both, quickly; both alive, neither ready
        stop_server()
        try:
            for client in (a, b):
                started = time.monotonic()
                refused = client.get("/v1/stats", headers=auth(token))
                message = assert_error(refused, 503, "store_unavailable")["error"]["message"]
                assert message.startswith("the service state database (postgresql+psycopg://")
                assert "***" in message and secret not in message
                polled = client.get(f"/v1/jobs/{job_id}", headers=auth(token))
                assert_error(polled, 503, "store_unavailable")
                not_ready = assert_error(client.get("/health/ready"), 503, "not_ready")
                assert not_ready["checks"]["state"] is False
                assert "the service state database" in not_ready["error"]["message"]
                assert client.get("/health").status_code == 200
                assert time.monotonic() - started < BOUND
        finally:
            ensure_running()

        # back: the same processes serve again, and what was stored before is still there
        for client, process, log in ((a, proc_a, "a.log"), (b, proc_b, "b.log")):
            _wait_ready(process, client, tmp_path / log)
            assert client.get("/v1/stats", headers=auth(token)).status_code == 200
        assert _wait_done(a, job_id, token)["status"] == "done"
        again = _upload(b, token, "door.md", "# Door\n\nThe front door sticks in winter.")
        assert _wait_done(a, again, token)["status"] == "done"

    for log in ("a.log", "b.log"):
        assert "Traceback" not in (tmp_path / log).read_text()
