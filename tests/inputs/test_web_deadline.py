"""A web source's ``timeout`` is one wall-clock deadline per page, against a real loopback
server that trickles bytes: slow pages fail on time, fast ones are not held up, and the
store is not locked while pages are being fetched.

The deadline is kept by the fetch itself, so every way in is bounded: a direct call of
``fetch`` (headers or body trickling, a slow chain of redirects), a source plug-in calling
it, the CLI, the HTTP API, the MCP tool and a crawl."""

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
from flexmatch.config import CrawlConfig, IngestConfig, SourceConfig
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.errors import WebImportError
from flexmatch.inputs.sources.crawl import Crawler
from flexmatch.inputs.sources.fetch import fetch
from flexmatch.inputs.sources.pages import page_document, parse_page
from flexmatch.inputs.sources.types import SourceContext
from flexmatch.inputs.sources.web_policy import WebPolicy
from flexmatch.models import Document, FailedDocument
from flexmatch.service import KeyStore
from flexmatch.sources import ItemRef, SourceType, register
from tests.conftest import FLEXMATCH, REPO, write_config

PAGE = (
    b"<!doctype html><html><head><title>Ferry timetable</title></head><body><main>"
    b"<h1>Ferry timetable</h1><p>The first ferry to the island leaves at seven fifteen.</p>"
    b"</main></body></html>"
)
LINKS = (
    b"<html><head><title>Harbour links</title></head><body><main><h1>Links</h1>"
    b"<p>Where to read about the ferries and the harbour.</p>"
    b'<a href="/slow-head-crawl">Slow</a> <a href="/fast.html">Ferries</a></main></body></html>'
)
HOP_TAKES = 0.6  # seconds each hop of /hop-0 … /hop-4 waits before it answers
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
    arrived_at: dict[str, float] = field(default_factory=dict)  # path → first request
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
        self.site.arrived_at.setdefault(self.path, time.monotonic())
        self.site.arrived.setdefault(self.path, threading.Event()).set()
        if self.path.startswith("/hop-"):  # /hop-<n>: a slow redirect to the next, to 4
            hop = int(self.path.removeprefix("/hop-"))
            self.site.stop.wait(HOP_TAKES)
            self.send_response(302 if hop < 4 else 200)
            body = PAGE if hop >= 4 else b""
            if hop < 4:
                self.send_header("Location", f"/hop-{hop + 1}")
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/links.html":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(LINKS)))
            self.end_headers()
            self.wfile.write(LINKS)
        elif self.path in ("/fast.html", "/warm-up.html"):
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
    # the fetches ran side by side: one after the other, each slow page would be asked
    # for only after the one before it met its deadline, and the fast one after all three
    # (timed at the server, not end to end: a loaded machine's embedding and commit are
    # not what this bounds)
    asked = [site.arrived_at[url.removeprefix(site.url)] for url in slow]
    assert max(asked) - min(asked) < timeout, f"asked at {asked}"
    assert site.arrived_at["/fast.html"] - min(asked) < timeout
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
    assert took < 1 + 3 + SLACK, f"took {took:.1f}s"  # far short of the 30 s trickle


def test_cli_stats_answers_while_an_ingest_is_fetching(
    tmp_path: Path, site: Site, embedder: OnnxEmbedder
) -> None:
    # the ingest must still be fetching when stats is done: stats takes ~1 s, ~1.5 s
    # after the page is asked for, on a quiet machine; 15 s leaves a loaded one room (the
    # trickle lasts 30 s)
    timeout = 15
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


# -- the deadline is the fetch's own, whoever calls it --------------------------------------
# seconds past the deadline a failing fetch may take (thread wake-up, teardown) on a
# loaded machine: far short of the 30 s trickle a broken deadline would wait out
SLACK = 3.0


def _policy(timeout: float, **extra: object) -> WebPolicy:
    return WebPolicy(allow_hosts=frozenset({"127.0.0.1"}), timeout=timeout, **extra)  # type: ignore[arg-type]


def _left_on_time(site: Site, path: str, timeout: float) -> None:
    """The server saw the client of ``path`` go away soon after the deadline (its socket
    was shut, not left open behind a failed call)."""
    until = time.monotonic() + timeout + 10
    while path not in site.dropped and time.monotonic() < until:
        time.sleep(0.05)
    assert path in site.dropped, f"the client of {path} never went away"
    # the server notices at its next byte (TRICKLE_EVERY) after the client's socket is shut
    held = site.dropped[path] - site.arrived_at[path]
    assert held < timeout + TRICKLE_EVERY + SLACK + 0.5, f"{path} held {held:.1f}s"


@pytest.mark.parametrize("path", ["/slow-head", "/slow-body"])
def test_a_direct_fetch_ends_at_its_deadline(site: Site, path: str) -> None:
    """Before the fetch kept its own deadline, a byte every 0.5 s held this for 30 s."""
    url = f"{site.url}{path}"
    started = time.monotonic()
    with pytest.raises(WebImportError) as caught:
        fetch(url, _policy(2))
    took = time.monotonic() - started
    assert str(caught.value) == f"{url}: the page took longer than 2s"
    assert 2 - 0.1 <= took < 2 + SLACK, f"took {took:.1f}s"
    _left_on_time(site, path, 2)


def test_a_trickled_tls_handshake_ends_at_the_deadline() -> None:
    """A server that answers the TLS ClientHello with a record it sends a byte at a time."""
    import socket

    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    gone: list[float] = []

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(4096)  # the ClientHello
            data = b"\x16\x03\x03\x40\x00"  # a handshake record of 16 KB, to come
            until = time.monotonic() + TRICKLE_FOR
            sent = 0
            while not stop.is_set() and time.monotonic() < until:
                try:
                    connection.sendall(data[sent : sent + 1] or b"\x00")
                except OSError:
                    gone.append(time.monotonic())
                    return
                sent += 1
                stop.wait(TRICKLE_EVERY)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"https://127.0.0.1:{port}/"
    started = time.monotonic()
    try:
        with pytest.raises(WebImportError) as caught:
            fetch(url, _policy(2))
        took = time.monotonic() - started
        thread.join(5)
    finally:
        stop.set()
        listener.close()
    assert str(caught.value) == f"{url}: the page took longer than 2s"
    assert 2 - 0.1 <= took < 2 + SLACK, f"took {took:.1f}s"
    assert gone and gone[0] - started < 2 + TRICKLE_EVERY + SLACK + 0.5


def test_the_watchdog_reaches_a_socket_whose_first_object_was_detached() -> None:
    """TLS wraps a connection's socket by detaching it into a new object: a read blocked
    on the new one (a trickling HTTPS server) still ends at the deadline."""
    import socket

    from flexmatch.inputs.sources.web_policy import FetchDeadline

    ours, theirs = socket.socketpair()
    deadline = FetchDeadline(0.5)
    try:
        deadline.watch(ours)
        wrapped = socket.socket(fileno=ours.detach())  # as ssl's wrap_socket does
        wrapped.settimeout(5)  # a broken watchdog fails the test, never hangs it
        started = time.monotonic()
        assert wrapped.recv(10) == b""  # woken by the shutdown, not by the peer
        assert 0.4 <= time.monotonic() - started < 0.5 + SLACK and deadline.passed
    finally:
        deadline.cancel()
        wrapped.close()
        theirs.close()


def test_the_addresses_of_a_host_share_the_deadline(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name whose first three addresses never answer (a listener whose backlog is full:
    the kernel drops further connection attempts) and whose fourth is the site: the
    attempts share one deadline, where each used to get the whole of it."""
    import socket

    port = int(site.url.rsplit(":", 1)[1])
    silent = socket.create_server(("127.0.0.2", port), backlog=0)
    pending = socket.create_connection(("127.0.0.2", port), timeout=2)  # fills the backlog
    addresses = ["127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.1"]
    real = socket.getaddrinfo

    def resolve(host: object, *args: object, **kwargs: object) -> list:  # type: ignore[type-arg]
        if host != "several.test":
            return real(host, *args, **kwargs)  # type: ignore[arg-type]
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    policy = WebPolicy(allow_hosts=frozenset({"several.test"}), timeout=2)
    url = f"http://several.test:{port}/fast.html"
    started = time.monotonic()
    try:
        with pytest.raises(WebImportError, match="took longer than 2s"):
            fetch(url, policy)
        took = time.monotonic() - started
        addresses[:3] = []  # the site alone: the same name is fetched
        assert b"seven fifteen" in fetch(url, policy).body
    finally:
        pending.close()
        silent.close()
    assert 2 - 0.1 <= took < 2 + SLACK, f"took {took:.1f}s"


def test_the_deadline_covers_a_chain_of_redirects(site: Site) -> None:
    """Five hops of 0.6 s each: every one is quick, the chain is not."""
    url = f"{site.url}/hop-0"
    started = time.monotonic()
    with pytest.raises(WebImportError) as caught:
        fetch(url, _policy(2))
    took = time.monotonic() - started
    assert 2 - 0.1 <= took < 2 + SLACK, f"took {took:.1f}s"
    message = str(caught.value)
    assert "the page took longer than 2s" in message
    assert f"(from {url}, its redirects included)" in message
    # with time enough the same chain ends on its page
    page = fetch(url, _policy(10))
    assert page.url == f"{site.url}/hop-4" and b"seven fifteen" in page.body


def test_fast_fetches_are_not_held_up_and_leave_no_watchdog_behind(site: Site) -> None:
    # a deadline longer than a loaded machine takes for all twenty: one fetch that waited
    # for its deadline is past the bound alone
    started = time.monotonic()
    for _ in range(20):
        assert b"seven fifteen" in fetch(f"{site.url}/fast.html", _policy(30)).body
    assert time.monotonic() - started < 20  # not one of them waited for its deadline
    until = time.monotonic() + 10  # a watchdog left behind would live 30 s
    while any(isinstance(t, threading.Timer) for t in threading.enumerate()):
        assert time.monotonic() < until, "a fetch's watchdog outlived it"
        time.sleep(0.05)


def test_a_body_past_the_byte_cap_is_cut_when_asked_to_truncate(site: Site) -> None:
    with pytest.raises(WebImportError, match="over the 50-byte cap"):
        fetch(f"{site.url}/fast.html", _policy(5, max_bytes=50))
    page = fetch(f"{site.url}/fast.html", _policy(5, max_bytes=50, truncate=True))
    assert page.body == PAGE[:50]


class _PageItems(SourceType):
    """A plug-in that fetches its pages with ``fetch`` itself, in the reader's thread (no
    killable worker process around it)."""

    def list_items(self, inputs: list[str]) -> Iterator[ItemRef]:
        for url in inputs:
            yield ItemRef(id=self.context.document_id(url), uri=url)

    def fetch(self, ref: ItemRef) -> Document:
        parsed = parse_page(fetch(ref.uri, self.context.policy))
        return page_document(parsed, document_id=ref.id, uri=ref.uri, source=self.context.name)


register("test_direct_pages")(_PageItems)


def test_a_plug_in_calling_fetch_itself_is_bounded(
    tmp_path: Path, site: Site, embedder: OnnxEmbedder
) -> None:
    timeout = 2
    kb_dir = tmp_path / "kb"
    write_config(
        kb_dir,
        "sources:\n  default: {}\n  pages:\n    type: test_direct_pages\n"
        f"    allow_hosts: ['127.0.0.1']\n    timeout: {timeout}\n",
    )
    slow = [f"{site.url}/slow-head-plugin", f"{site.url}/slow-body-plugin"]
    fast = f"{site.url}/fast.html"
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        kb.ingest([f"{site.url}/warm-up.html"], source="pages")
        started = time.monotonic()
        report = kb.ingest([*slow, fast], source="pages")
        took = time.monotonic() - started
    assert took < 2 * (timeout + SLACK) + 2, f"took {took:.1f}s"  # the two, one after the other
    assert report.added == 1 and sorted(f.uri for f in report.failed) == sorted(slow)
    for failure in report.failed:
        assert failure.error == f"{failure.uri}: the page took longer than {timeout}s"
    for url in slow:
        _left_on_time(site, url.removeprefix(site.url), timeout)


def test_a_source_context_without_workers_fetches_under_the_deadline(
    tmp_path: Path, site: Site
) -> None:
    """``fetch_page`` with no fetcher processes (a plug-in run on its own, a test) calls
    the fetch in this process: its own deadline is all there is."""
    config = SourceConfig(type="web", allow_hosts=["127.0.0.1"], timeout=1)
    context = SourceContext(
        name="web", config=config, options=None, kb_dir=tmp_path, limits=IngestConfig()
    )
    started = time.monotonic()
    with pytest.raises(WebImportError, match="took longer than 1s"):
        context.fetch_page(f"{site.url}/slow-head-context")
    assert time.monotonic() - started < 1 + SLACK


def test_a_crawl_fails_a_slow_page_on_time_and_reads_the_rest(tmp_path: Path, site: Site) -> None:
    timeout = 2
    config = SourceConfig(
        type="web",
        urls=[f"{site.url}/links.html"],
        allow_hosts=["127.0.0.1"],
        timeout=timeout,
        crawl=CrawlConfig(delay=0, sitemap=False),
    )
    context = SourceContext(
        name="site", config=config, options=None, kb_dir=tmp_path, limits=IngestConfig()
    )
    started = time.monotonic()
    items = [e.data if isinstance(e, ItemRef) else e for e in Crawler(context, config.urls).run()]
    took = time.monotonic() - started
    assert took < timeout + SLACK + 1, f"took {took:.1f}s"
    by_uri = {item.uri: item for item in items}
    slow = by_uri[f"{site.url}/slow-head-crawl"]
    assert isinstance(slow, FailedDocument)
    assert slow.error == f"{site.url}/slow-head-crawl: the page took longer than {timeout}s"
    assert isinstance(by_uri[f"{site.url}/fast.html"], Document)
    _left_on_time(site, "/slow-head-crawl", timeout)


def test_the_cli_fails_a_slow_url_on_time(tmp_path: Path, site: Site) -> None:
    timeout = 2
    kb_dir = tmp_path / "kb"
    _web_config(kb_dir, timeout)
    slow, fast = f"{site.url}/slow-head-cli", f"{site.url}/fast.html"
    env = {k: v for k, v in os.environ.items() if k != "FLEXMATCH_KB"}
    done = subprocess.run(
        [str(FLEXMATCH), "ingest", "--kb", str(kb_dir), "--source", "web", "--json", slow, fast],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    assert report["added"] == 1
    (failure,) = report["failed"]
    assert failure["uri"] == slow and f"took longer than {timeout}s" in failure["error"]
    _left_on_time(site, "/slow-head-cli", timeout)


def test_the_http_api_fails_a_slow_url_on_time(
    tmp_path: Path, site: Site, embedder: OnnxEmbedder
) -> None:
    import httpx

    from flexmatch.adapters.http import Limits, create_app
    from tests.adapters.http.servers import UvicornThread, auth, wait_for_job

    timeout = 2
    kb_dir = tmp_path / "kb"
    _web_config(kb_dir, timeout)
    slow, fast = f"{site.url}/slow-body-api", f"{site.url}/fast.html"
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        app = create_app(kb, limits=Limits(rate_per_second=1_000, burst=1_000))
        _, token = KeyStore.for_kb(kb_dir).create("default", "read,write", "writer")
        with UvicornThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            accepted = client.post(
                "/v1/documents/url",
                json={"urls": [slow, fast], "source": "web"},
                headers=auth(token),
            )
            assert accepted.status_code == 202, accepted.text
            job = wait_for_job(client, accepted.json()["job_id"], token)
    outcomes = {d["input"]: d for d in job["documents"]}
    assert outcomes[fast]["outcome"] == "added", job
    assert outcomes[slow]["outcome"] == "failed"
    assert f"took longer than {timeout}s" in outcomes[slow]["error"]
    _left_on_time(site, "/slow-body-api", timeout)


def test_the_mcp_tool_fails_a_slow_url_on_time(
    tmp_path: Path, site: Site, embedder: OnnxEmbedder
) -> None:
    import asyncio

    from mcp import Client

    from flexmatch.adapters.mcp import build_server

    timeout = 2
    kb_dir = tmp_path / "kb"
    _web_config(kb_dir, timeout)
    slow = f"{site.url}/slow-head-mcp"

    async def session() -> tuple[str, bool, str]:
        async with Client(build_server(kb)) as client:
            failed = await client.call_tool("ingest_url", {"url": slow, "source": "web"})
            fast = await client.call_tool(
                "ingest_url", {"url": f"{site.url}/fast.html", "source": "web"}
            )
        return failed.content[0].text, fast.is_error, fast.content[0].text  # type: ignore[union-attr]

    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        slow_text, fast_failed, fast_text = asyncio.run(session())
    assert f"took longer than {timeout}s" in slow_text and slow in slow_text
    assert not fast_failed and "added" in fast_text
    _left_on_time(site, "/slow-head-mcp", timeout)
