"""Two real ``flexmatch serve`` processes on loopback sharing one state database
(``service.state_url``) answer as one service: a key made or revoked through either holds
on both, a job started on one is polled on the other, and a write through one hides the
other's cached answers.

No Qdrant server can run here and the embedded store admits one process, so each replica
has its own in-memory vector store (``store.url: ':memory:'``): what is shared, and
tested, is the state; the documents each replica finds are its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.adapters.http.servers import auth, free_port
from tests.conftest import REPO, stop, write_config

FLEXMATCH = Path(sys.executable).parent / "flexmatch"
READY_WITHIN = 150.0  # two processes loading the embedding model on a shared 2-core machine


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FLEXMATCH_KB"}
    return {**env, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _replica_config(state: Path) -> str:
    return f"store:\n  url: ':memory:'\nservice:\n  state_url: sqlite:///{state}\n"


@contextmanager
def _serving(kb: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``flexmatch serve`` over ``kb`` on a free port, stopped when the block ends."""
    port = free_port()
    log = (kb.parent / f"{kb.name}.log").open("w", encoding="utf-8")
    command = [str(FLEXMATCH), "serve", "--kb", str(kb), "--port", str(port)]
    options = ["--rate", "1000", "--burst", "1000", "--log-level", "warning"]
    process = subprocess.Popen(
        [*command, *options], stdout=log, stderr=subprocess.STDOUT, text=True, env=_env()
    )
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        stop(process)
        log.close()


def _wait_ready(process: subprocess.Popen[str], client: httpx.Client, log: Path) -> None:
    deadline = time.monotonic() + READY_WITHIN
    while True:
        if process.poll() is not None:
            raise AssertionError(f"flexmatch serve exited:\n{log.read_text()[-2000:]}")
        try:
            if client.get("/health/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"never ready:\n{log.read_text()[-2000:]}"
        time.sleep(0.2)


def _wait_done(client: httpx.Client, job_id: str, token: str) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while True:
        response = client.get(f"/v1/jobs/{job_id}", headers=auth(token))
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        if job["status"] in ("done", "failed"):
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job['status']}"
        time.sleep(0.1)


def _upload(client: httpx.Client, token: str, name: str, text: str) -> str:
    response = client.post(
        "/v1/documents", files={"files": (name, text.encode())}, headers=auth(token)
    )
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


def keys_and_jobs_are_shared(a: httpx.Client, b: httpx.Client, admin: str) -> tuple[str, str]:
    """A key created through replica A works on B, revoked through B it is refused by A at
    once; a job accepted by A is polled and listed on B. Returns a writer's token and the
    job's id."""
    created = a.post("/v1/keys", json={"permissions": ["read", "write"]}, headers=auth(admin))
    assert created.status_code == 201, created.text
    writer, writer_id = created.json()["token"], created.json()["key"]["id"]
    assert b.get("/v1/stats", headers=auth(writer)).status_code == 200
    assert b.delete(f"/v1/keys/{writer_id}", headers=auth(admin)).status_code == 200
    assert a.get("/v1/stats", headers=auth(writer)).status_code == 401
    worker = b.post("/v1/keys", json={"permissions": ["read", "write"]}, headers=auth(admin))
    token = str(worker.json()["token"])
    job_id = _upload(a, token, "keys.md", "# Keys\n\nThe spare key is under the blue pot.")
    done = _wait_done(b, job_id, token)
    assert done["status"] == "done" and done["counts"]["added"] == 1, done
    assert [d["input"] for d in done["documents"]] == ["keys.md"]
    assert done["updated_at"] and job_id in [
        j["id"] for j in b.get("/v1/jobs", headers=auth(token)).json()
    ]
    return token, job_id


def test_two_replicas_share_keys_jobs_and_cache_invalidation(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    kb_a, kb_b = tmp_path / "a", tmp_path / "b"
    for kb in (kb_a, kb_b):
        write_config(kb, _replica_config(state))
    # the keys CLI writes where the servers read: the state_url in flexmatch.yaml
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
    assert not (kb_b / ".flexmatch" / "keys.sqlite").exists() and state.exists()

    with ExitStack() as stack:
        (proc_a, url_a), (proc_b, url_b) = (stack.enter_context(_serving(k)) for k in (kb_a, kb_b))
        a = stack.enter_context(httpx.Client(base_url=url_a, timeout=60))
        b = stack.enter_context(httpx.Client(base_url=url_b, timeout=60))
        _wait_ready(proc_a, a, tmp_path / "a.log")
        _wait_ready(proc_b, b, tmp_path / "b.log")

        token, _ = keys_and_jobs_are_shared(a, b, admin)

        # A caches its answer; a write through B makes it unreachable on A
        def ask() -> httpx.Response:
            query = {"query": "Where is the spare key?"}
            response = a.get("/v1/search", params=query, headers=auth(token))
            assert response.status_code == 200, response.text
            return response

        first = ask()
        assert first.headers["x-cache"] == "miss"
        assert "blue pot" in first.json()["results"][0]["content"]
        assert ask().headers["x-cache"] == "hit"
        other = _upload(b, token, "door.md", "# Door\n\nThe front door sticks in winter.")
        assert _wait_done(a, other, token)["status"] == "done"  # polled on A this time
        after = ask()
        assert after.headers["x-cache"] == "miss"  # B's write reached A's cache
        assert "blue pot" in after.json()["results"][0]["content"]  # A's own store, unchanged
        assert ask().headers["x-cache"] == "hit"

    for log in ("a.log", "b.log"):
        assert "Traceback" not in (tmp_path / log).read_text()


def test_serve_with_two_workers(tmp_path: Path) -> None:
    """``--workers 2``: uvicorn's processes each open the knowledge base and share the
    port and the state. No Qdrant server runs here, so the store is a closed port: the
    workers answer, check keys, and say the store is unavailable."""
    write_config(tmp_path / "kb", "store:\n  url: http://127.0.0.1:9\n")
    made = subprocess.run(
        [str(FLEXMATCH), "keys", "create", "--kb", str(tmp_path / "kb")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    token = made.stdout.strip()
    port = free_port()
    log = tmp_path / "serve.log"
    command = [str(FLEXMATCH), "serve", "--kb", str(tmp_path / "kb"), "--port", str(port)]
    with log.open("w") as out:
        process = subprocess.Popen(
            [*command, "--workers", "2", "--log-level", "info"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                deadline = time.monotonic() + 90
                while True:
                    assert process.poll() is None, log.read_text()
                    try:
                        if client.get("/health").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.2)
                for _ in range(4):  # whichever worker answers
                    stats = client.get("/v1/stats", headers=auth(token))
                    assert stats.status_code == 503, stats.text
                    assert stats.json()["error"]["code"] == "store_unavailable"
                    bad = client.get("/v1/stats", headers=auth("fm_000000000000_x"))
                    assert bad.status_code == 401
        finally:
            stop(process)
    assert log.read_text().count("Started server process") == 2
    assert "Traceback" not in log.read_text()


def test_several_workers_need_a_qdrant_server(tmp_path: Path) -> None:
    for store, reason in (
        ("", "needs store.url (a Qdrant server)"),
        ("store:\n  url: ':memory:'\n", "would give each worker its own empty store"),
    ):
        write_config(tmp_path, store)
        refused = subprocess.run(
            [str(FLEXMATCH), "serve", "--kb", str(tmp_path), "--workers", "2"],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=_env(),
            timeout=120,
        )
        said = " ".join(refused.stderr.split())  # rich wraps the line to the terminal
        assert refused.returncode == 2 and reason in said, refused.stderr
        assert "Traceback" not in refused.stderr
