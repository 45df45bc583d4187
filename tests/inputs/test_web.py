"""Web import against a real HTTP server on 127.0.0.1, and the address rules."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.errors import WebImportError
from flexmatch.inputs.sources.fetch import fetch
from flexmatch.inputs.sources.web_policy import (
    WebPolicy,
    check_url,
    guarded_session,
    refused_address,
)
from tests.conftest import write_config

PAGE = b"""<!doctype html><html><head><title>Harbour guide</title>
<script>var tracking = 1;</script><style>p {color: red}</style></head>
<body><header>Site header menu</header><nav><a href="/">Home</a> Navigation links</nav>
<main><h1>Harbour guide</h1><p>The harbour opens at six in the morning.</p>
<h2>Fees</h2><p>Mooring costs twelve euros per night for boats under ten metres.</p></main>
<footer>Copyright footer text</footer></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        routes = {
            "/page.html": (200, {"Content-Type": "text/html; charset=utf-8"}, PAGE),
            "/to-page": (302, {"Location": "/page.html"}, b""),
            "/to-localhost": (302, {"Location": f"http://localhost:{port}/page.html"}, b""),
            "/loop": (302, {"Location": "/loop"}, b""),
            "/big": (200, {"Content-Type": "text/html"}, b"<p>" + b"x" * 5000 + b"</p>"),
            "/binary": (200, {"Content-Type": "application/octet-stream"}, b"\x00\x01"),
            "/missing": (404, {}, b"nope"),
        }
        status, headers, body = routes.get(self.path, (404, {}, b""))
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


ALLOW = WebPolicy(allow_hosts=frozenset({"127.0.0.1"}), timeout=5, max_redirects=3)


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("172.16.5.4", "private"),
        ("169.254.169.254", "link-local"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("100.64.0.1", "non-public"),
    ],
)
def test_non_public_addresses_are_refused(address: str, reason: str) -> None:
    assert (refused_address(address) or "").startswith(reason)


@pytest.mark.parametrize("address", ["8.8.8.8", "2001:4860:4860::8888", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert refused_address(address) is None


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.com/x", "only http and https"),
        ("http://localhost/", "loopback"),
        ("http://[::1]:8080/", "loopback"),
        ("http://2130706433/", "loopback"),
        ("http:///nohost", "no host"),
    ],
)
def test_check_url_refuses(url: str, message: str) -> None:
    with pytest.raises(WebImportError, match=message):
        check_url(url, WebPolicy())


def test_connection_guard_checks_the_address_actually_reached(site: str) -> None:
    session = guarded_session(WebPolicy())  # no allow-list; check_url deliberately skipped
    with pytest.raises(WebImportError, match=r"connected to a loopback address 127\.0\.0\.1"):
        session.get(f"{site}/page.html", timeout=5)


def test_fetch_follows_allowed_redirects(site: str) -> None:
    page = fetch(f"{site}/to-page", ALLOW)
    assert page.url == f"{site}/page.html" and page.content_type == "text/html"


def test_redirect_to_a_loopback_name_is_refused(site: str) -> None:
    with pytest.raises(WebImportError, match=r"localhost.*loopback address"):
        fetch(f"{site}/to-localhost", ALLOW)


def test_limits(site: str) -> None:
    with pytest.raises(WebImportError, match="more than 3 redirects"):
        fetch(f"{site}/loop", ALLOW)
    small = WebPolicy(allow_hosts=frozenset({"127.0.0.1"}), max_bytes=1000)
    with pytest.raises(WebImportError, match="over the 1,000-byte cap"):
        fetch(f"{site}/big", small)
    with pytest.raises(WebImportError, match="HTTP 404"):
        fetch(f"{site}/missing", ALLOW)


def test_without_allow_list_loopback_is_refused(site: str) -> None:
    with pytest.raises(WebImportError, match=r"refused: '127\.0\.0\.1' is a loopback address"):
        fetch(f"{site}/page.html", WebPolicy())


def test_web_ingest_keeps_main_content_and_metadata(
    tmp_path: Path, site: str, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(
        kb_dir,
        "sources:\n  default: {}\n  web:\n    type: web\n    allow_hosts: ['127.0.0.1']\n"
        f"    urls: ['{site}/page.html', '{site}/binary', '{site}/to-localhost']\n",
    )
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.ingest(source="web")
        assert report.added == 1 and len(report.failed) == 2
        errors = " ".join(f.error for f in report.failed)
        assert "cannot import content of type 'application/octet-stream'" in errors
        assert "loopback address" in errors
        (record,) = kb.list_documents(source="web")
        detail = kb.get_document(record.id)
        results = kb.query("How much does mooring cost per night?")
    text = " ".join(c.content for c in detail.chunks)
    assert "Mooring costs twelve euros" in text
    for dropped in ("tracking", "Site header", "Navigation links", "Copyright footer", "color"):
        assert dropped not in text
    assert record.title == "Harbour guide" and record.uri == f"{site}/page.html"
    assert record.metadata["url"] == f"{site}/page.html" and "fetched_at" in record.metadata
    assert detail.chunks[-1].heading_path[-1] == "Fees"
    assert results[0].uri == f"{site}/page.html"


def test_url_in_a_files_source_without_allow_list_is_refused(
    tmp_path: Path, site: str, embedder: OnnxEmbedder
) -> None:
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        report = kb.ingest([f"{site}/page.html", "file:///etc/passwd"])
    assert report.documents == 0
    assert "loopback address" in report.failed[0].error
    assert "only http and https" in report.failed[1].error


@pytest.mark.parametrize(
    ("address", "reason"),
    [("2002:7f00:1::", "loopback"), ("2002:0a00:0001::", "private"), ("fec0::1", "site-local")],
)
def test_addresses_hidden_in_ipv6_forms_are_refused(address: str, reason: str) -> None:
    assert (refused_address(address) or "").startswith(reason)


def test_malformed_urls_are_clear_errors() -> None:
    for url in ("http://example.com:99999/", "http://[::1"):
        with pytest.raises(WebImportError, match="not a valid URL"):
            check_url(url, WebPolicy())


def test_url_import_never_reads_local_paths(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nThe vault code is 1234.\n")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        report = kb.run_sync(kb.aingest_urls([str(secret), "~/x.md", "/"]))
        assert report.documents == 0 and len(report.failed) == 3
        assert all("only http and https" in f.error for f in report.failed)
        assert kb.list_documents() == []
