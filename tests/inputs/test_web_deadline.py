"""A web source's ``timeout`` is one wall-clock deadline per page, against a real loopback
server that trickles bytes: slow pages fail on time, fast ones are not held up, and the
store is not locked while pages are being fetched."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.embeddings import OnnxEmbedder
from tests.conftest import FLEXMATCH, REPO, write_config

PAGE = (
    b"<!doctype html><html><head><title>Ferry timetable</title></head><body><main>"
    b"<h1>Ferry timetable</h1><p>The first ferry to the island leaves at seven fifteen.</p>"
    b"</main></body></html>"
)
TRICKLE_EVERY = 0.5  # seconds between two bytes
TRICKLE_FOR = 30.0  # then the server hangs up: a broken deadline fails a test, never hangs it
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Padding: "
    + b"p" * 200
    + b"\r\nContent-Length: 5\r\n\r\nhello"
)


@dataclass
class Site:
    url: str
    stop: threading.Event
    arrived: dict[str, threading.Event] = field(default_factory=dict)
    dropped: dict[str, float] = field(default_factory=dict)  # path → when the client left


class _Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    site: Site  # set on the subclass the fixture makes

    def log_message(self, *args: object) -> None:
        pass

    def _trickle(self, data: bytes, *, forever: bool) -> None:
        """Send ``data`` one byte at a time (then spaces, if asked) until the client goes
        away, the server stops or ``TRICKLE_FOR`` has passed."""
        self.close_connection = True  # hang up when done
        sent = 0
        until = time.monotonic() + TRICKLE_FOR
        while not self.site.stop.is_set() and time.monotonic() < until:
            byte = data[sent : sent + 1] if sent < len(data) else b" "
            if sent >= len(data) and not forever:
                return
            try:
                self.wfile.write(byte)
                self.wfile.flush()
            except OSError:  # the fetch was stopped: its worker process is gone
                self.site.dropped.setdefault(self.path, time.monotonic())
                return
            sent += 1
            self.site.stop.wait(TRICKLE_EVERY)

    def do_GET(self) -> None:
        self.site.arrived.setdefault(self.path, threading.Event()).set()
        if self.path in ("/fast.html", "/warm-up.html"):
            page = PAGE if self.path == "/fast.html" else b"<p>Warm-up page about lighthouses.</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
        elif self.path.startswith("/slow-body"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.flush()
            self._trickle(b"<html><body><p>", forever=True)
        elif self.path.startswith("/slow-head"):
            self._trickle(HEAD, forever=True)
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()


@pytest.fixture
def site() -> Iterator[Site]:
    stop = threading.Event()
    made = Site(url="", stop=stop)
    handler = type("Handler", (_Handler,), {"site": made})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    made.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield made
    stop.set()  # every trickle ends within one step
    server.shutdown()
    server.server_close()


def _web_config(
    kb_dir: Path, timeout: float, urls: list[str] | None = None, extra: str = ""
) -> None:
    url_list = ", ".join(f"'{u}'" for u in urls or [])
    write_config(
        kb_dir,
        f"{extra}sources:\n  default: {{}}\n  web:\n    type: web\n"
        f"    allow_hosts: ['127.0.0.1']\n    timeout: {timeout}\n    urls: [{url_list}]\n",
    )


def test_slow_servers_fail_at_the_deadline_and_fast_pages_are_not_held_up(
    tmp_path: Path, site: Site, embedder: OnnxEmbedder
) -> None:
    timeout = 2
    kb_dir = tmp_path / "kb"
    _web_config(kb_dir, timeout)
    slow = [f"{site.url}/slow-body-1", f"{site.url}/slow-body-2", f"{site.url}/slow-head"]
    fast = f"{site.url}/fast.html"
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        # start-up costs are not what is timed here: the model, the worker pools, the store
        kb.run_sync(kb.aingest_urls([f"{site.url}/warm-up.html"], source="web"))
        started = time.monotonic()
        report = kb.run_sync(kb.aingest_urls([*slow, fast], source="web"))
        took = time.monotonic() - started
        records = [r.uri for r in kb.list_documents(source="web")]
        hits = kb.query("When does the first ferry leave?")
    # three slow pages one after the other would take at least 3 * timeout
    assert took < 2 * timeout + 1, f"took {took:.1f}s"
    assert took >= timeout - 0.2  # the slow ones really were waited for, up to the deadline
    assert report.added == 1 and len(report.failed) == 3
    for url in slow:
        (failure,) = [f for f in report.failed if f.uri == url]
        assert f"took longer than {timeout}s" in failure.error and url in failure.error
    outcomes = {o.input: o.outcome for o in report.outcomes}
    assert outcomes[fast] == "added" and all(outcomes[u] == "failed" for u in slow)
    assert sorted(records) == [fast, f"{site.url}/warm-up.html"]
    assert hits and hits[0].uri == fast and "seven fifteen" in hits[0].content
    # the fetches were stopped (their worker processes killed), not left running: the
    # server sees every slow client go away soon after the deadline
    deadline = time.monotonic() + 10
    while len(site.dropped) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(site.dropped) == ["/slow-body-1", "/slow-body-2", "/slow-head"]
    assert max(site.dropped.values()) - started < timeout + 4


def test_fetch_pages_is_bounded_by_the_deadline_too(
    tmp_path: Path, site: Site, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    _web_config(kb_dir, 1)
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        started = time.monotonic()
        items = kb.run_sync(kb.afetch_pages([f"{site.url}/slow-head"], source="web"))
        took = time.monotonic() - started
        assert not kb.store.exists()  # fetching opens no store
    (failed,) = items
    assert "took longer than 1s" in failed.error
    assert took < 1 + 3, f"took {took:.1f}s"


def test_cli_stats_answers_while_an_ingest_is_fetching(
    tmp_path: Path, site: Site, embedder: OnnxEmbedder
) -> None:
    # the ingest must still be fetching when stats is done: stats takes ~1 s, ~1.5 s
    # after the page is asked for, so 5 s leaves a wide margin
    timeout = 5
    slow = f"{site.url}/slow-body-cli"
    kb_dir = tmp_path / "kb"
    # a short lock wait: if the ingest held the store, stats would fail, not just be slow
    _web_config(kb_dir, timeout, [slow], extra="store:\n  lock_timeout: 1\n")
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nThe harbour office opens at nine.\n", encoding="utf-8")
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        assert kb.ingest([note]).added == 1  # the store exists, so stats must open it

    env = {k: v for k, v in os.environ.items() if k != "FLEXMATCH_KB"}
    process = subprocess.Popen(
        [str(FLEXMATCH), "ingest", "--kb", str(kb_dir), "--source", "web"],
        cwd=REPO,
        env={**env, "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        arrived = site.arrived.setdefault("/slow-body-cli", threading.Event())
        assert arrived.wait(60), "the ingest never started fetching"
        time.sleep(0.5)
        assert process.poll() is None  # still fetching
        started = time.monotonic()
        stats = subprocess.run(
            [str(FLEXMATCH), "stats", "--kb", str(kb_dir), "--json"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - started
        assert process.poll() is None, "the ingest ended before stats was done"
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["documents"] == 1
        assert took < timeout, f"stats took {took:.1f}s"
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert process.returncode == 2, err
    assert slow in err and f"took longer than {timeout}s" in " ".join(err.split())
    assert "Ingested 0 documents" in out
