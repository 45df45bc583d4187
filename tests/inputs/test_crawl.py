"""Whole-site web import against a small site served on loopback: links, a sitemap, a
robots.txt exclusion, a redirect, ETags, and a page that goes away; and the bounds on what a
site can make a crawl cost (links kept per page, robots.txt size, crawl delay, validators
kept across a partial crawl)."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.config import CrawlConfig, IngestConfig, SourceConfig
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.inputs.sources.crawl import ROBOTS_MAX_BYTES, Crawler, UrlFilter
from flexmatch.inputs.sources.fetch import FetchedPage
from flexmatch.inputs.sources.pages import normalise_url, read_crawled, sitemap_urls
from flexmatch.inputs.sources.types import ItemRef, SourceContext
from flexmatch.models import Document, FailedDocument, IngestReport
from flexmatch.testing import FakeLLMServer
from tests.conftest import llm_config, run, write_config


def _page(title: str, text: str, links: str = "") -> bytes:
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body>"
        f"<nav>{links}</nav><main><h1>{title}</h1><p>{text}</p></main></body></html>"
    ).encode()


HOME_LINKS = (
    '<a href="/a">Harbour</a> <a href="/a#opening">Opening hours</a> <a href="b">Ferries</a> '
    '<a href="/old">Timetable</a> <a href="/private/x">Staff</a> <a href="/logo.png">Logo</a> '
    '<a href="mailto:office@example.com">Mail</a> <a href="http://other.invalid/x">Elsewhere</a>'
)
SITE_PAGES = {
    "/": _page("Harbour town", "Welcome to the harbour town guide for visitors.", HOME_LINKS),
    "/a": _page("Harbour", "The harbour opens at six in the morning.", '<a href="/">Home</a>'),
    "/b": _page("Ferries", "The first ferry to the island leaves at seven fifteen."),
    "/new": _page("Timetable", "Buses leave the harbour square every twenty minutes."),
    "/private/x": _page("Staff only", "The staff room code is 4711."),
    "/unlinked": _page("Lighthouse", "The lighthouse can be visited on Sundays in summer."),
}


@dataclass
class Seen:
    path: str
    if_none_match: str | None
    status: int
    body_bytes: int


@dataclass
class Site:
    url: str
    pages: dict[str, bytes] = field(default_factory=lambda: dict(SITE_PAGES))
    redirects: dict[str, str] = field(default_factory=lambda: {"/old": "/new"})
    robots: str = "User-agent: *\nDisallow: /private/\n"
    down: bool = False  # every request answers 503
    failing: set[str] = field(default_factory=set)  # these paths answer 503
    seen: list[Seen] = field(default_factory=list)

    def sitemap(self) -> bytes:
        entries = "".join(f"<url><loc>{self.url}{p}</loc></url>" for p in ("/unlinked", "/a"))
        return (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
        ).encode()

    def page_requests(self) -> list[Seen]:
        return [s for s in self.seen if s.path not in ("/robots.txt", "/sitemap.xml")]


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path
            etag = None
            headers: dict[str, str] = {}
            if site.down or path in site.failing:
                status, body = 503, b"down for maintenance"
            elif path == "/robots.txt":
                status, body = 200, site.robots.encode()
                headers["Content-Type"] = "text/plain"
            elif path == "/sitemap.xml":
                status, body = 200, site.sitemap()
                headers["Content-Type"] = "application/xml"
            elif path in site.redirects:
                status, body = 301, b""
                headers["Location"] = site.redirects[path]
            elif path in site.pages:
                body = site.pages[path]
                etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
                headers["Content-Type"] = "text/html; charset=utf-8"
                headers["ETag"] = etag
                status = 200
                if self.headers.get("If-None-Match") == etag:
                    status, body = 304, b""
            else:
                status, body = 404, b"not here"
            sent = 0 if status == 304 else len(body)  # logged before the client hears back
            site.seen.append(Seen(path, self.headers.get("If-None-Match"), status, sent))
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            if status != 304:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if status != 304:
                self.wfile.write(body)

    return Handler


@pytest.fixture
def site() -> Iterator[Site]:
    holder = Site(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(holder))
    holder.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield holder
    server.shutdown()
    server.server_close()


def _site_config(site: Site, extra: str = "", crawl: str = "{delay: 0}") -> str:
    return (
        "sources:\n  default: {}\n  site:\n    type: web\n"
        f"    urls: ['{site.url}/']\n    allow_hosts: ['127.0.0.1']\n    crawl: {crawl}\n" + extra
    )


def _ingest(kb_dir: Path, *args: str) -> tuple[int, dict, str]:
    done = run("ingest", "--kb", str(kb_dir), "--source", "site", "--json", *args)
    return done.returncode, json.loads(done.stdout), done.stderr


def _uris(kb_dir: Path, embedder: OnnxEmbedder) -> set[str]:
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        return {record.uri for record in kb.list_documents(source="site")}


def test_a_site_is_crawled_recrawled_for_free_and_pruned(
    tmp_path: Path, site: Site, llm_server: FakeLLMServer, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server, _site_config(site)))

    # first crawl: the linked pages, the sitemap's unlinked page, the redirect's target
    code, report, err = _ingest(kb_dir)
    assert code == 0, err
    expected = {f"{site.url}{p}" for p in ("/", "/a", "/b", "/new", "/unlinked")}
    stored = {o["input"] for o in report["outcomes"] if o["outcome"] == "added"}
    assert stored == expected and report["added"] == 5 and report["failed"] == []
    asked = [s.path for s in site.seen]
    assert "/private/x" not in asked  # robots.txt
    assert "/logo.png" not in asked  # never a page
    assert asked.count("/a") == 1 and asked.count("/old") == 1  # each URL once
    assert report["usage"]["calls"] > 0

    # second crawl, with a page gone from the site: every page still there is asked for
    # conditionally, none sent, nothing parsed or paid; --prune removes exactly the gone one
    del site.pages["/b"]
    site.seen.clear()
    code, report, err = _ingest(kb_dir, "--prune")
    assert code == 0, err
    assert report["unchanged"] == 4 and report["not_modified"] == 4
    assert report["added"] == report["changed"] == 0 and report["usage"]["calls"] == 0
    assert report["removed"] == [f"{site.url}/b"]
    conditional = [s for s in site.page_requests() if s.path not in ("/old", "/b")]
    assert sorted(s.path for s in conditional) == ["/", "/a", "/new", "/unlinked"]
    assert all(s.if_none_match and s.status == 304 and s.body_bytes == 0 for s in conditional)
    assert [s.status for s in site.page_requests() if s.path == "/b"] == [404]
    assert _uris(kb_dir, embedder) == expected - {f"{site.url}/b"}

    # the site is down: the crawl fails wholesale, nothing is pruned, and it says so
    site.down = True
    done = run("ingest", "--kb", str(kb_dir), "--source", "site", "--prune")
    assert done.returncode == 2
    assert "not pruned" in done.stderr and "robots.txt answered HTTP 503" in done.stderr
    assert _uris(kb_dir, embedder) == expected - {f"{site.url}/b"}


# -- the crawler on its own (no store): scope, robots, politeness, limits -----------------
def _context(site: Site, tmp_path: Path, allow: bool = True, **crawl: object) -> SourceContext:
    config = SourceConfig(
        type="web",
        urls=[f"{site.url}/"],
        allow_hosts=["127.0.0.1"] if allow else [],
        crawl=CrawlConfig(**{"delay": 0, **crawl}),  # type: ignore[arg-type]
    )
    return SourceContext(
        name="site", config=config, options=None, kb_dir=tmp_path, limits=IngestConfig()
    )


def _crawl(context: SourceContext, **kwargs: object) -> list[Document | FailedDocument]:
    crawler = Crawler(context, list(context.config.urls), **kwargs)  # type: ignore[arg-type]
    return [e.data if isinstance(e, ItemRef) else e for e in crawler.run()]


def test_robots_crawl_delay_spaces_the_requests_to_a_host(tmp_path: Path, site: Site) -> None:
    site.robots = "User-agent: *\nCrawl-delay: 3\nDisallow: /private/\n"
    waits: list[float] = []
    items = _crawl(_context(site, tmp_path, delay=1), sleep=waits.append, clock=lambda: 0.0)
    assert len(items) == 5
    # robots.txt first (no wait), then every request 3 s (robots wins over delay: 1) after
    # the one before: with a clock that stands still, each wait is the whole delay
    assert waits and set(waits) == {3.0} and len(waits) == len(site.seen) - 1


def test_the_configured_delay_applies_when_robots_asks_for_less(tmp_path: Path, site: Site) -> None:
    waits: list[float] = []
    _crawl(_context(site, tmp_path, delay=2), sleep=waits.append, clock=lambda: 0.0)
    assert set(waits) == {2.0}


def test_max_pages_stops_the_crawl_and_says_it_is_incomplete(tmp_path: Path, site: Site) -> None:
    context = _context(site, tmp_path, max_pages=2)
    items = _crawl(context)
    assert len(site.page_requests()) == 2 and len(items) == 2
    assert "crawl.max_pages (2)" in context.log.incomplete[0]


def test_max_depth_and_include_limit_what_is_read(tmp_path: Path, site: Site) -> None:
    items = _crawl(_context(site, tmp_path, max_depth=0, sitemap=False))
    assert [i.uri for i in items] == [f"{site.url}/"]
    site.seen.clear()
    items = _crawl(_context(site, tmp_path, include=["/a", "/un*"]))
    # the seed is read for its links, imported only when it matches include
    assert sorted(i.uri for i in items) == [f"{site.url}/a", f"{site.url}/unlinked"]
    assert "/b" not in [s.path for s in site.seen]


def test_loopback_is_refused_without_allow_hosts(tmp_path: Path, site: Site) -> None:
    context = _context(site, tmp_path, allow=False)
    items = _crawl(context)
    assert site.seen == []  # not one request reached the server
    assert isinstance(items[0], FailedDocument) and "loopback address" in items[0].error
    assert context.log.incomplete


def test_a_redirect_to_a_loopback_name_is_refused_on_its_hop(tmp_path: Path, site: Site) -> None:
    port = site.url.rsplit(":", 1)[1]
    site.redirects["/"] = f"http://localhost:{port}/a"  # allowed: 127.0.0.1, not localhost
    context = _context(site, tmp_path, sitemap=False)
    items = _crawl(context)
    assert [s.path for s in site.seen] == ["/robots.txt", "/"]  # nothing through localhost
    (failure,) = items
    assert "'localhost' is a loopback address" in failure.error and context.log.incomplete


def test_a_seed_that_robots_txt_disallows_is_not_fetched(tmp_path: Path, site: Site) -> None:
    site.robots = "User-agent: FlexMatch\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
    context = _context(site, tmp_path)
    items = _crawl(context)
    assert [s.path for s in site.seen] == ["/robots.txt"]
    assert "robots.txt disallows it" in items[0].error and context.log.incomplete


# -- the pieces ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("HTTP://Example.COM", "http://example.com/"),
        ("https://example.com:443/a?b=1#top", "https://example.com/a?b=1"),
        ("http://user:pw@example.com:8080/x", "http://example.com:8080/x"),
        ("mailto:someone@example.com", None),
        ("javascript:alert(1)", None),
        ("http://[::1]:80/", "http://[::1]/"),
    ],
)
def test_urls_are_normalised(url: str, normal: str | None) -> None:
    assert normalise_url(url) == normal


def test_include_and_exclude_take_globs_and_regexes() -> None:
    wanted = UrlFilter(["/docs/*", "re:/blog/\\d{4}/"], ["*.pdf", "re:draft"])
    assert wanted("https://x.org/docs/a") and wanted("https://x.org/blog/2024/post")
    assert not wanted("https://x.org/about") and not wanted("https://x.org/docs/a.pdf")
    assert not wanted("https://x.org/docs/draft-1")
    assert UrlFilter([], [])("https://x.org/anything")


def test_sitemaps_index_gzip_and_no_entities() -> None:
    index = (
        b'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>https://x.org/s1.xml</loc></sitemap></sitemapindex>"
    )
    assert sitemap_urls(index, 10_000) == ([], ["https://x.org/s1.xml"])
    plain = b"<urlset><url><loc> https://x.org/a#frag </loc></url></urlset>"
    assert sitemap_urls(gzip.compress(plain), 10_000) == (["https://x.org/a"], [])
    hostile = (
        b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
        b"<urlset><url><loc>https://x.org/&e;</loc></url></urlset>"
    )
    pages, _ = sitemap_urls(hostile, 10_000)
    assert all("root" not in p for p in pages)


def test_a_page_that_fails_once_does_not_prune_what_lies_below_it(
    tmp_path: Path, site: Site, embedder: OnnxEmbedder
) -> None:
    """/hub answers 503 on the second crawl: the pages only it links to are still
    visited (through its links from the last crawl) and nothing is pruned."""
    site.pages = {
        "/": _page("Home", "Welcome to the harbour town guide.", '<a href="/hub">Guide</a>'),
        "/hub": _page("Guide", "The guide index.", '<a href="/a">A</a> <a href="/b">B</a>'),
        "/a": _page("Harbour", "The harbour opens at six in the morning."),
        "/b": _page("Ferries", "The first ferry leaves at seven fifteen."),
    }
    site.redirects = {}
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, _site_config(site, crawl="{delay: 0, sitemap: false}"))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        assert kb.ingest([], source="site").added == 4
        site.failing = {"/hub"}
        report = kb.ingest([], source="site", prune=True)
        assert report.removed == []
        assert [f.error for f in report.failed] == [f"{site.url}/hub: HTTP 503"]
        assert len(kb.list_documents(source="site")) == 4


# -- what a site can make a crawl cost is bounded -------------------------------------------
def test_the_links_kept_from_a_page_are_capped_in_page_order() -> None:
    body = "".join(
        f'<a href="/p/{i}">{i}</a><a href="/p/{i}#again">again</a>' for i in range(20_000)
    )
    page = FetchedPage(
        "http://x.org/", "text/html", f"<p>Index.</p>{body}".encode(), "2026-01-01T00:00:00Z"
    )
    capped = read_crawled(page, 100)
    assert capped.links == [f"http://x.org/p/{i}" for i in range(100)]
    assert capped.more_links
    whole = read_crawled(page, 20_000)  # exactly as many distinct links as allowed
    assert len(whole.links) == 20_000 and not whole.more_links
    assert len(read_crawled(page).links) == 1_000  # the default


def test_a_crawl_follows_only_the_links_kept_and_says_so(tmp_path: Path, site: Site) -> None:
    links = "".join(f'<a href="/n/{i}">{i}</a>' for i in range(300))
    site.pages = {"/": _page("Index", "The index of the harbour pages.", links)}
    context = _context(site, tmp_path, sitemap=False, max_links_per_page=5)
    crawler = Crawler(context, list(context.config.urls))
    list(crawler.run())
    assert crawler.links[f"{site.url}/"] == [f"{site.url}/n/{i}" for i in range(5)]
    asked = [s.path for s in site.page_requests()]
    assert sorted(asked) == sorted(["/", *(f"/n/{i}" for i in range(5))])
    (warning,) = context.log.warnings
    assert "1 page had more than 5 links" in warning and "crawl.max_links_per_page" in warning


def test_a_robots_txt_over_512_kb_is_read_in_its_first_512_kb(tmp_path: Path, site: Site) -> None:
    """RFC 9309: a crawler may stop reading robots.txt after 500 KiB. A longer one used to
    fail the byte cap and so block the whole site."""
    padding = "# a long comment line that pads the file\n" * 14_000  # ~590 KB
    site.robots = f"User-agent: *\nDisallow: /private/\n{padding}Disallow: /a\n"
    assert len(site.robots) > ROBOTS_MAX_BYTES
    context = _context(site, tmp_path, sitemap=False)
    items = _crawl(context)
    asked = [s.path for s in site.page_requests()]
    assert "/private/x" not in asked  # a rule within the first 512 KB holds
    assert "/a" in asked  # a rule past it is not read
    assert {i.uri for i in items if isinstance(i, Document)} >= {f"{site.url}/", f"{site.url}/a"}
    assert context.log.incomplete == []


@pytest.mark.parametrize(
    ("rule", "asked"), [("Crawl-delay: 86400", "86400s"), ("Request-rate: 1/86400s", "86400s")]
)
def test_a_robots_delay_is_capped_and_the_cap_reported(
    tmp_path: Path, site: Site, rule: str, asked: str
) -> None:
    site.robots = f"User-agent: *\n{rule}\nDisallow: /private/\n"
    waits: list[float] = []
    context = _context(site, tmp_path, sitemap=False)
    items = _crawl(context, sleep=waits.append, clock=lambda: 0.0)
    assert len(items) == 4 and set(waits) == {10.0}  # the default cap, not a day
    (warning,) = context.log.warnings
    assert f"asks for {asked} between requests" in warning
    assert "crawled at 10s instead (crawl.max_robots_delay)" in warning
    waits.clear()
    _crawl(
        _context(site, tmp_path, sitemap=False, max_robots_delay=2),
        sleep=waits.append,
        clock=lambda: 0.0,
    )
    assert set(waits) == {2.0}


def test_a_partial_crawl_keeps_the_validators_of_pages_it_did_not_reach(
    tmp_path: Path, site: Site, embedder: OnnxEmbedder
) -> None:
    """A crawl stopped by max_pages forgets nothing of the pages it did not reach: the
    next whole crawl asks for every stored page conditionally and gets 304s."""
    kb_dir = tmp_path / "kb"
    site.robots = "User-agent: *\nCrawl-delay: 86400\nDisallow: /private/\n"

    def crawl(settings: str, **options: bool) -> IngestReport:
        write_config(kb_dir, _site_config(site, crawl=settings))
        with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
            return kb.ingest([], source="site", **options)

    whole = "{delay: 0, max_robots_delay: 0}"
    first = crawl(whole)
    assert first.added == 5
    assert first.warnings == [
        f"{site.url}/robots.txt asks for 86400s between requests; crawled at 0s instead "
        "(crawl.max_robots_delay)"
    ]
    site.seen.clear()
    partial = crawl("{delay: 0, max_robots_delay: 0, max_pages: 2}", prune=True)
    assert len(site.page_requests()) == 2 and partial.removed == []
    site.seen.clear()
    again = crawl(whole)
    conditional = [s for s in site.page_requests() if s.path != "/old"]
    assert sorted(s.path for s in conditional) == ["/", "/a", "/b", "/new", "/unlinked"]
    assert all(s.if_none_match and s.status == 304 for s in conditional), conditional
    assert again.not_modified == 5 and again.added == again.changed == 0
