"""Whole-site web import: a breadth-first walk of a site's links, politely.

Seeds are the source's URLs and the pages the sites' sitemaps list (robots.txt's
``Sitemap:`` lines, else ``/sitemap.xml``). robots.txt is obeyed (protego; RFC 9309: an
unreachable one, a 5xx, means nothing may be fetched, a missing one, a 4xx, means
everything may), and two requests to one host are at least ``crawl.delay`` apart, more
when robots.txt's ``Crawl-delay`` or ``Request-rate`` asks for it. Every request, robots
and sitemaps included, goes through the source's web rules (the address guard on every
redirect hop, the deadline, the byte cap) in a killable fetcher process, and every page
is read in a parser process.

A page already stored is asked for conditionally (its ETag / Last-Modified): a 304 Not
Modified reuses the stored copy and the links it had last time (kept in the source's
state file), so an unchanged site costs one small request a page and nothing else. A crawl
that stops part-way keeps what it knew of the pages it did not reach, so the next one still
asks for them conditionally.

What a site can make a crawl cost is bounded: the links kept per page
(``crawl.max_links_per_page``), robots.txt (its first 512 KB are read, as RFC 9309 allows;
a longer one does not block the site) and the pace robots.txt asks for
(``crawl.max_robots_delay``; a slower one is reported, not obeyed).
"""

from __future__ import annotations

import mimetypes
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import urlsplit

from flexmatch.config import CrawlConfig
from flexmatch.errors import FlexMatchError
from flexmatch.inputs.sources.fetch import VALIDATORS, FetchedPage, conditional_headers
from flexmatch.inputs.sources.items import Item
from flexmatch.inputs.sources.pages import (
    HTML_TYPES,
    CrawledPage,
    normalise_url,
    page_document,
    parseable,
    read_crawled,
    sitemap_urls,
)
from flexmatch.inputs.sources.types import ItemRef, SourceContext
from flexmatch.inputs.sources.web_policy import ROBOT_NAME
from flexmatch.models import FailedDocument

ROBOTS_MAX_BYTES = 512 * 1024  # what RFC 9309 asks crawlers to read at least: read no more
MAX_SITEMAPS = 20  # sitemap files read per run (an index names the others)
GONE = (404, 410)
STATE_VERSION = 1
# suffixes of what is never a readable page, not fetched at all
_SKIPPED_MAJOR_TYPES = ("image/", "audio/", "video/", "font/")
_SKIPPED_TYPES = {
    "application/zip",
    "application/gzip",
    "application/x-tar",
    "application/x-7z-compressed",
    "application/vnd.rar",
    "application/octet-stream",
    "application/javascript",
    "text/javascript",
    "text/css",
    "application/x-msdownload",
    "application/x-iso9660-image",
    "application/wasm",
}


def crawlable(content_type: str) -> bool:
    """A page a crawl imports: HTML, plain text or Markdown, or a file type a parser
    reads (not CSS, scripts or data that happen to be ``text/``)."""
    if content_type in HTML_TYPES or content_type in ("text/plain", "text/markdown"):
        return True
    return not content_type.startswith("text/") and parseable(content_type)


def _skipped_by_suffix(url: str) -> bool:
    guessed, _ = mimetypes.guess_type(urlsplit(url).path)
    return guessed is not None and (
        guessed.startswith(_SKIPPED_MAJOR_TYPES) or guessed in _SKIPPED_TYPES
    )


class UrlFilter:
    """``crawl.include``/``exclude``: globs on the URL or its path, ``re:`` regexes."""

    def __init__(self, include: list[str], exclude: list[str]) -> None:
        self.include = [self._matcher(p) for p in include]
        self.exclude = [self._matcher(p) for p in exclude]

    @staticmethod
    def _matcher(pattern: str) -> Callable[[str], bool]:
        if pattern.startswith("re:"):
            regex = re.compile(pattern[3:])
            return lambda url: regex.search(url) is not None
        return lambda url: fnmatchcase(url, pattern) or fnmatchcase(urlsplit(url).path, pattern)

    def __call__(self, url: str) -> bool:
        if self.include and not any(match(url) for match in self.include):
            return False
        return not any(match(url) for match in self.exclude)


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass
class _Robots:
    """One origin's robots.txt: None rules allow everything; ``refused`` says why
    nothing may be fetched (robots.txt unreachable)."""

    rules: Any = None
    refused: str | None = None
    delay: float = 0.0
    sitemaps: tuple[str, ...] = ()

    def allows(self, url: str) -> bool:
        return self.refused is None and (
            self.rules is None or self.rules.can_fetch(url, ROBOT_NAME)
        )


@dataclass
class _Visit:
    url: str
    depth: int
    seed: bool


class Crawler:
    """One crawl of a web source: yields an ``ItemRef`` per page read (its ``data`` the
    document, the stored copy when unchanged, or the failure), or a ``FailedDocument``."""

    def __init__(
        self,
        context: SourceContext,
        seeds: list[str],
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        assert context.config.crawl is not None
        self.context = context
        self.settings: CrawlConfig = context.config.crawl
        self.seeds = seeds
        self.sleep = sleep
        self.clock = clock
        self.wanted = UrlFilter(self.settings.include, self.settings.exclude)
        self.hosts: set[str] = set()  # the seeds' hosts (and where the seeds redirect to)
        self.robots: dict[str, _Robots] = {}
        self.last_request: dict[str, float] = {}
        self.queue: deque[_Visit] = deque()
        self.queued: set[str] = set()  # queued or read: each URL is visited once
        self.requests = 0  # page requests, counted against max_pages
        self.sitemaps_read = 0
        state = context.load_state()
        known = state.get("version") == STATE_VERSION
        self.old_links: dict[str, list[str]] = state.get("links", {}) if known else {}
        self.old_redirects: dict[str, str] = state.get("redirects", {}) if known else {}
        self.links: dict[str, list[str]] = {}
        self.redirects: dict[str, str] = {}
        self.visited: set[str] = set()  # URLs asked for this run (a page, or a redirect hop)
        self.more_links: list[str] = []  # pages with more links than were kept

    # -- the walk ------------------------------------------------------------------------
    def run(self) -> Iterator[ItemRef | Item]:
        for given in self.seeds:
            url = normalise_url(given)
            if url is None:
                yield FailedDocument(
                    uri=given, error=f"{given}: only http and https URLs can be crawled"
                )
                self.context.incomplete(f"seed {given} is not an http(s) URL")
                continue
            self.hosts.add(urlsplit(url).netloc)
            self._enqueue(url, 0, seed=True)
        finished = False
        try:
            while self.queue:
                visit = self.queue.popleft()
                if self.requests >= self.settings.max_pages:
                    self.context.incomplete(
                        f"the crawl stopped at crawl.max_pages ({self.settings.max_pages}) with "
                        f"{len(self.queue) + 1} pages left to visit"
                    )
                    break
                yield from self._visit(visit)
            finished = True
        finally:  # the links seen so far, even when the run is stopped part-way
            self._save_state(partial=not finished or bool(self.context.log.incomplete))
        if self.more_links:
            cap = self.settings.max_links_per_page
            pages = len(self.more_links)
            self.context.warn(
                f"{pages} page{'s' if pages > 1 else ''} had more than {cap:,} links "
                f"(crawl.max_links_per_page); the first {cap:,} of each were followed "
                f"(first: {self.more_links[0]})"
            )

    def _save_state(self, *, partial: bool) -> None:
        """Links and redirects for the next run. After a partial run (stopped, or not able
        to see the whole site) the pages it did not reach keep last run's entries: their
        stored validators are still sent, and their links still followed."""
        links, redirects = self.links, self.redirects
        if partial:
            links = {
                **{u: v for u, v in self.old_links.items() if u not in self.visited},
                **links,
            }
            redirects = {
                **{u: v for u, v in self.old_redirects.items() if u not in self.visited},
                **redirects,
            }
        self.context.save_state({"version": STATE_VERSION, "links": links, "redirects": redirects})

    def _enqueue(self, url: str, depth: int, *, seed: bool = False) -> None:
        if url in self.queued:
            return
        if not seed and not self._in_scope(url):
            return
        self.queued.add(url)
        self.queue.append(_Visit(url, depth, seed))

    def _in_scope(self, url: str) -> bool:
        if self.settings.same_host and urlsplit(url).netloc not in self.hosts:
            return False
        return self.wanted(url) and not _skipped_by_suffix(url)

    def _visit(self, visit: _Visit) -> Iterator[ItemRef | Item]:
        """Read one page, its redirects followed here, hop by hop, each a request of its
        own under robots.txt, the scope and the politeness delay."""
        final_known = self.old_redirects.get(visit.url, visit.url)
        stored = self.context.stored.metadata(self.context.document_id(final_known)) or {}
        headers = conditional_headers(stored) if final_known in self.old_links else {}
        current = visit.url
        for _ in range(self.context.config.max_redirects + 1):
            self.visited.add(current)
            robots = self._robots_for(current, seed=visit.seed)
            if not robots.allows(current):
                if visit.seed:
                    why = robots.refused or "robots.txt disallows it"
                    yield FailedDocument(uri=current, error=f"{current}: not crawled: {why}")
                    self.context.incomplete(f"seed {visit.url} was not crawled ({why})")
                elif robots.refused:  # the host's rules could not be read: not seen
                    self.context.incomplete(f"{current} was not crawled ({robots.refused})")
                return
            self.requests += 1
            try:
                page = self._request(current, headers, accept=crawlable)
            except FlexMatchError as exc:
                yield from self._failed(visit, current, str(exc))
                return
            if page.location is None:
                break
            target = normalise_url(page.location)
            if target is None:
                yield from self._failed(visit, current, f"{current}: redirects to {page.location}")
                return
            if visit.seed:  # a site that moves to www. is still the same site
                self.hosts.add(urlsplit(target).netloc)
            elif not self._in_scope(target):
                return
            self.redirects[visit.url] = target
            if target in self.queued:
                return  # read, or to be read, under its own URL
            self.queued.add(target)
            current = target
        else:
            error = f"{visit.url}: more than {self.context.config.max_redirects} redirects"
            yield from self._failed(visit, visit.url, error)
            return
        document_id = self.context.document_id(current)
        if page.status == 304 and headers:
            links = self.old_links.get(current)
            validators: dict[str, Any] = {k: stored[k] for k in VALIDATORS if k in stored}
            reused = self.context.reuse(document_id, validators) if current == final_known else None
            if reused is not None and links is not None:
                links = links[: self.settings.max_links_per_page]
                self.links[current] = links
                self._follow(links, visit)
                yield ItemRef(id=document_id, uri=current, data=reused)
                return
            try:  # no usable copy: fetch it whole
                page = self._request(current, {}, accept=crawlable)
            except FlexMatchError as exc:
                yield from self._failed(visit, current, str(exc))
                return
        yield from self._read(page, current, document_id, visit)

    def _read(
        self, page: FetchedPage, final: str, document_id: str, visit: _Visit
    ) -> Iterator[ItemRef | Item]:
        if page.status in GONE:
            self.context.log.gone.add(document_id)
            if visit.seed:
                yield FailedDocument(uri=final, error=f"{final}: HTTP {page.status}")
                self.context.incomplete(f"seed {final} answered HTTP {page.status}")
            return
        if not 200 <= page.status < 300:
            yield from self._failed(visit, final, f"{final}: HTTP {page.status}")
            return
        if not crawlable(page.content_type):  # a link to an image, an archive, …
            if visit.seed:
                error = f"{final}: cannot import content of type '{page.content_type}'"
                yield FailedDocument(uri=final, error=error)
            return
        try:
            crawled: CrawledPage = self.context.parse(
                read_crawled, page, self.settings.max_links_per_page, label=final
            )
        except FlexMatchError as exc:
            self._keep_old_links(visit, final)
            yield ItemRef(id=document_id, uri=final, data=FailedDocument(uri=final, error=str(exc)))
            return
        if crawled.more_links:
            self.more_links.append(final)
        self.links[final] = crawled.links
        self._follow(crawled.links, visit)
        imported = self.wanted(final)  # a seed outside include is read for its links only
        if crawled.parsed is not None and imported:
            document = page_document(
                crawled.parsed, document_id=document_id, uri=final, source=self.context.name
            )
            yield ItemRef(id=document_id, uri=final, data=document)
        elif crawled.error is not None and imported and not crawled.empty:
            failure = FailedDocument(uri=final, error=crawled.error)
            yield ItemRef(id=document_id, uri=final, data=failure)

    def _failed(self, visit: _Visit, url: str, error: str) -> Iterator[ItemRef | Item]:
        """A page that could not be read this time: reported, and its stored copy kept.
        The pages it linked to last time are still visited; a page never read before
        (no links known) makes the crawl incomplete, so nothing below it is pruned."""
        if visit.seed:
            self.context.incomplete(f"seed {visit.url} could not be read")
        self._keep_old_links(visit, url)
        document_id = self.context.document_id(url)
        yield ItemRef(id=document_id, uri=url, data=FailedDocument(uri=url, error=error))

    def _keep_old_links(self, visit: _Visit, url: str) -> None:
        old = self.old_links.get(url, self.old_links.get(visit.url))
        if old is None:
            self.context.incomplete(f"{url} could not be read, and its links are not known")
            return
        old = old[: self.settings.max_links_per_page]  # a state kept before the cap
        self.links[url] = old
        self._follow(old, visit)

    def _follow(self, links: list[str], visit: _Visit) -> None:
        if visit.depth >= self.settings.max_depth:
            return
        for link in links:
            self._enqueue(link, visit.depth + 1)

    # -- politeness ----------------------------------------------------------------------
    def _request(
        self,
        url: str,
        headers: dict[str, str],
        *,
        accept: Callable[[str], bool] | None = None,
        max_bytes: int | None = None,
        follow: bool = False,
        truncate: bool = False,
    ) -> FetchedPage:
        """One request, at least the host's delay after the last one to it; redirects
        are followed here only for robots.txt and sitemaps (a page's are visits)."""
        host = origin(url)
        robots = self.robots.get(host)
        delay = max(self.settings.delay, robots.delay if robots else 0.0)
        last = self.last_request.get(host)
        if last is not None:
            wait = last + delay - self.clock()
            if wait > 0:
                self.sleep(wait)
        try:
            return self.context.fetch_page(
                url,
                headers or None,
                accept=accept,
                max_bytes=max_bytes,
                follow_redirects=follow,
                truncate=truncate,
            )
        finally:
            self.last_request[host] = self.clock()

    def _robots_for(self, url: str, *, seed: bool = False) -> _Robots:
        host = origin(url)
        if host not in self.robots:
            self.robots[host] = self._read_robots(host)
            if seed and self.settings.sitemap:
                self._read_sitemaps(host, self.robots[host])
        return self.robots[host]

    def _read_robots(self, host: str) -> _Robots:
        from protego import Protego

        try:
            page = self._request(
                f"{host}/robots.txt", {}, max_bytes=ROBOTS_MAX_BYTES, follow=True, truncate=True
            )
        except FlexMatchError as exc:
            return _Robots(refused=f"robots.txt could not be read ({exc})")
        if page.status >= 500:
            return _Robots(refused=f"robots.txt answered HTTP {page.status}")
        if not 200 <= page.status < 300:
            return _Robots()  # none: everything may be fetched
        body = page.body
        if len(body) >= ROBOTS_MAX_BYTES:  # cut: a rule cut in two is not read
            body = body[: body.rfind(b"\n") + 1]
        rules = Protego.parse(body.decode("utf-8", errors="replace"))
        delay = float(rules.crawl_delay(ROBOT_NAME) or 0.0)
        rate = rules.request_rate(ROBOT_NAME)
        if rate is not None and rate.requests:
            delay = max(delay, rate.seconds / rate.requests)
        cap = self.settings.max_robots_delay
        if delay > cap:
            self.context.warn(
                f"{host}/robots.txt asks for {delay:g}s between requests; crawled at "
                f"{cap:g}s instead (crawl.max_robots_delay)"
            )
            delay = cap
        return _Robots(rules=rules, delay=delay, sitemaps=tuple(rules.sitemaps))

    def _read_sitemaps(self, host: str, robots: _Robots) -> None:
        """Queue the pages a site's sitemaps list (depth 0: they are listed, not linked)."""
        fallback = f"{host}/sitemap.xml"  # looked for where robots.txt names none
        if robots.refused is not None or not (robots.sitemaps or robots.allows(fallback)):
            return
        pending = deque(robots.sitemaps or (fallback,))
        seen: set[str] = set()
        while pending and self.sitemaps_read < MAX_SITEMAPS:
            url = normalise_url(pending.popleft())
            if url is None or url in seen:
                continue
            seen.add(url)
            self.sitemaps_read += 1
            try:
                page = self._request(url, {}, follow=True)
                if not 200 <= page.status < 300:
                    continue
                limit = self.context.limits.max_document_bytes
                pages, nested = self.context.parse(sitemap_urls, page.body, limit, label=url)
            except FlexMatchError:
                continue  # a broken sitemap leaves the links to find the pages
            pending.extend(nested)
            for listed in pages:
                self._enqueue(listed, 0)
