"""``flexmatch serve`` as a real process: its workers never outlive it, a restart after a
``kill -9`` finds the port and the store free, and a second server on the same knowledge
base is refused at start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.adapters.cli.test_service_commands import FLEXMATCH, run
from tests.adapters.http.servers import auth, free_port, wait_for_job
from tests.conftest import write_config
from tests.inputs.test_isolation import _alive, _children

KB_CONFIG = """\
sources:
  default: {}
  web:
    type: web
    allow_hosts: ["127.0.0.1"]
    timeout: 300
"""


def _start(kb: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(FLEXMATCH), "serve", "--kb", str(kb), "--port", str(port), "--log-level", "warning"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def _wait_ready(process: subprocess.Popen[str], port: int, limit: float = 240) -> None:
    """Until ``/health/ready`` answers 200 (a loaded machine starts a server slowly)."""
    deadline = time.monotonic() + limit
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        while True:
            if process.poll() is not None:
                pytest.fail(f"serve exited {process.returncode}: {process.communicate()[1]}")
            try:
                if client.get("/health/ready").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server never became ready"
            time.sleep(0.2)


def _stop(process: subprocess.Popen[str]) -> str:
    if process.poll() is None:
        process.terminate()
    try:
        return process.communicate(timeout=30)[1] or ""
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate(timeout=30)[1] or ""


@pytest.fixture
def silent_site() -> Iterator[str]:
    """A loopback site that accepts connections and never answers: a fetch of it keeps
    its worker busy (not reading its channel) for as long as the source's timeout."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/page"
    finally:
        server.close()


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in _children(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def test_a_killed_server_leaves_no_worker_and_restarts(tmp_path: Path, silent_site: str) -> None:
    kb = tmp_path / "kb"
    write_config(kb, KB_CONFIG)
    token = run("keys", "create", "--kb", str(kb), "--permissions", "read,write").stdout.strip()
    port = free_port()
    server = _start(kb, port)
    workers: set[int] = set()
    try:
        _wait_ready(server, port)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            upload = client.post(  # parsed in the parse pool; opens (and locks) the store
                "/v1/documents",
                files={"files": ("note.html", b"<h1>Gate</h1><p>The gate code is 4711.</p>")},
                headers=auth(token),
            )
            assert upload.status_code == 202, upload.text
            assert wait_for_job(client, upload.json()["job_id"], token)["status"] == "done"
            fetch = client.post(  # a fetch pool worker, busy on a site that never answers
                "/v1/documents/url",
                json={"urls": [silent_site], "source": "web"},
                headers=auth(token),
            )
            assert fetch.status_code == 202, fetch.text
            deadline = time.monotonic() + 120
            while len(workers := _descendants(server.pid)) < 3:  # parse pool + a fetcher
                assert time.monotonic() < deadline, f"workers never started: {workers}"
                time.sleep(0.1)
            time.sleep(0.5)  # the fetch is under way
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        deadline = time.monotonic() + 30  # the kill is at once; a loaded machine's end is not
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [w for w in workers if _alive(w)]
        assert not survivors, f"workers outlived the killed server: {survivors}"

        again = _start(kb, port)  # the same knowledge base and port
        try:
            _wait_ready(again, port)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                found = client.get(
                    "/v1/search", params={"query": "What is the gate code?"}, headers=auth(token)
                )
                assert found.status_code == 200 and "4711" in found.text
        finally:
            assert "Traceback" not in _stop(again)
    finally:
        for worker in workers:  # first: a survivor holds the server's stderr open
            if _alive(worker):
                os.kill(worker, signal.SIGKILL)
        _stop(server)


def test_a_second_server_on_the_same_knowledge_base_is_refused_at_start(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    # a new knowledge base: no store yet for either server to lock; a lock wait far longer
    # than a loaded machine's start of a second server, so the two are told apart
    write_config(kb, "store:\n  lock_timeout: 300\n")
    first_port = free_port()
    first = _start(kb, first_port)
    try:
        _wait_ready(first, first_port)
        started = time.monotonic()
        second = _start(kb, free_port())
        try:
            _, stderr = second.communicate(timeout=240)
        finally:
            _stop(second)
        assert second.returncode not in (0, None)
        assert time.monotonic() - started < 120, "refused only after waiting for the store"
        said = " ".join(stderr.split())  # the terminal width wraps it
        assert "already served by another FlexMatch process" in said, stderr
        assert f"(pid {first.pid})" in said and "Traceback" not in said
        with httpx.Client(base_url=f"http://127.0.0.1:{first_port}", timeout=10) as client:
            assert client.get("/health/ready").status_code == 200  # the first one is unharmed
    finally:
        assert "Traceback" not in _stop(first)
    restarted = _start(kb, first_port)  # the lock went with the first server
    try:
        _wait_ready(restarted, first_port)
    finally:
        _stop(restarted)


def test_a_killed_server_takes_its_uvicorn_workers_along(tmp_path: Path) -> None:
    """``--workers 2`` over a Qdrant server (a closed port here: the workers start and say
    the store is unavailable): a ``kill -9`` of the supervisor leaves no worker on the port."""
    kb = tmp_path / "kb"
    write_config(kb, "store:\n  url: http://127.0.0.1:9\n")
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(FLEXMATCH), "serve", "--kb", str(kb), "--port", str(port), "--workers", "2"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while log.read_text().count("Started server process") < 2:  # both made their app
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        workers = _descendants(server.pid)
        assert len(workers) >= 2, workers
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        deadline = time.monotonic() + 30  # the kill is at once; a loaded machine's end is not
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [w for w in workers if _alive(w)], "uvicorn workers outlived the server"
        with socket.socket() as again:  # the port is free
            again.bind(("127.0.0.1", port))
    finally:
        for worker in workers:
            if _alive(worker):
                os.kill(worker, signal.SIGKILL)
        server.kill()
        server.wait(timeout=30)
