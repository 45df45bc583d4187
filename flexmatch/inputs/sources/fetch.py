"""Web import: fetch a page with ``requests`` under safety rules, keep its main content.

Only http and https. Loopback, private, link-local, multicast, reserved and unspecified
addresses (IPv4 and IPv6, IPv4-mapped forms included) are refused, for the names a URL
resolves to on every redirect hop *and* for the address each connection actually reaches
(so a name that re-resolves between check and connect is still caught). Hosts on an
explicit allow-list are exempt. One deadline, a redirect limit and a byte cap bound every
fetch: the deadline is wall-clock time for the whole fetch (connect, headers and body of
every redirect hop), kept by the fetch itself whoever calls it (a watchdog shuts its
sockets at the deadline: requests' own timeouts are per socket read, so a server sending a
byte a second would never trip them). Name resolution is not under the watchdog.

The page-level work a crawl needs (links, sitemaps) is here too: it runs in the same
killable worker processes as fetching and parsing (``isolation``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import mimetypes
import re
import socket
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from flexmatch.errors import (
    EmptyDocumentError,
    FlexMatchError,
    ParseError,
    UnsupportedFormatError,
    WebImportError,
)
from flexmatch.models import Document, Element, ParsedDocument

ROBOT_NAME = "FlexMatch"  # the product token robots.txt rules name
USER_AGENT = f"{ROBOT_NAME}/0.1 (knowledge-base import)"
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", ""})


@dataclass(frozen=True)
class WebPolicy:
    allow_hosts: frozenset[str] = frozenset()
    timeout: float = 15.0
    max_redirects: int = 5
    max_bytes: int = 10_000_000
    user_agent: str = USER_AGENT
    truncate: bool = False  # past max_bytes keep the first max_bytes (robots.txt), not refuse

    def allows(self, host: str) -> bool:
        return host.lower().strip("[]") in self.allow_hosts


@dataclass(frozen=True)
class FetchedPage:
    """A response: ``url`` is where the redirects ended; ``status`` 304 (not modified) and
    4xx/5xx answers have no body, nor has a page of a type the caller did not accept."""

    url: str
    content_type: str
    body: bytes
    fetched_at: str
    status: int = 200
    etag: str | None = None  # the validators a later conditional request sends back
    last_modified: str | None = None
    location: str | None = None  # where a redirect not followed points (absolute)

    @property
    def validators(self) -> dict[str, str]:
        """``etag`` and ``last_modified`` as document metadata (the ones the server sent)."""
        found = {"etag": self.etag, "last_modified": self.last_modified}
        return {key: value for key, value in found.items() if value}


# the metadata keys a stored page keeps to be asked for again conditionally
VALIDATORS = ("etag", "last_modified")


def conditional_headers(metadata: dict[str, Any] | None) -> dict[str, str]:
    """``If-None-Match`` / ``If-Modified-Since`` from a stored page's validators."""
    metadata = metadata or {}
    headers = {}
    if isinstance(metadata.get("etag"), str):
        headers["If-None-Match"] = metadata["etag"]
    if isinstance(metadata.get("last_modified"), str):
        headers["If-Modified-Since"] = metadata["last_modified"]
    return headers


def refused_address(address: str) -> str | None:
    """Why ``address`` may not be fetched from, or None when it is a public address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local:
            return f"site-local address {ip}"
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is not None:
            ip = embedded
    for label, flag in (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("unspecified", ip.is_unspecified),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
    ):
        if flag:
            return f"{label} address {ip}"
    return None if ip.is_global else f"non-public address {ip}"


def check_url(url: str, policy: WebPolicy) -> str:
    """Check scheme and host of ``url`` and every address its host resolves to."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WebImportError(f"{url}: not a valid URL: {exc}") from exc
    if parts.scheme not in ("http", "https"):
        raise WebImportError(f"{url}: only http and https URLs can be imported")
    host = parts.hostname
    if not host:
        raise WebImportError(f"{url}: the URL has no host")
    if policy.allows(host):
        return host
    try:
        infos = socket.getaddrinfo(
            host, port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except (socket.gaierror, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise WebImportError(f"{url}: cannot resolve host '{host}' ({why})") from exc
    for info in infos:
        reason = refused_address(str(info[4][0]))
        if reason:
            raise WebImportError(
                f"{url}: refused: '{host}' is a {reason} (allow it with the source's allow_hosts)"
            )
    return host


def _shut(sock: socket.socket) -> None:
    """Wake whatever is blocked on ``sock`` (a shutdown does, a close from another thread
    may not); a socket already closed is left alone."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Deadline:
    """One fetch's wall-clock limit, over every socket the fetch opens: at the deadline a
    timer thread shuts them all, so a read blocked on a trickling server returns at once
    (and fails) instead of waiting for its next byte.

    It holds a duplicate of each socket: a shutdown through it reaches the connection
    whatever became of the original (TLS detaches it to wrap it, before its handshake),
    and the duplicate's descriptor cannot be reused by another socket while it is held."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.expired = False
        self._over = False  # the fetch is done
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return self.at - time.monotonic()

    @property
    def passed(self) -> bool:
        return self.expired or time.monotonic() >= self.at

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock``'s connection at the deadline (at once when it has passed)."""
        with self._lock:
            if not (self.expired or self._over):
                self._sockets.append(sock.dup())
                return
        _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)

    def cancel(self) -> None:
        """The fetch is over: no watchdog, and the duplicates closed."""
        self._timer.cancel()
        with self._lock:
            self._over = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()

    def timeouts(self) -> tuple[float, float]:
        """(connect, read) timeouts for requests: connecting gets what is left (the
        watchdog cannot see a socket before it is connected; each address of a host is
        tried with what is left then, ``_connect_in_time``); reads get a second more, so
        the watchdog, not a per-read timeout, ends a slow fetch."""
        left = max(self.remaining(), 0.001)
        return left, left + 1.0

    def error(self, url: str, current: str) -> WebImportError:
        via = f" (from {url}, its redirects included)" if current != url else ""
        return WebImportError(f"{current}: the page took longer than {self.seconds:g}s{via}")


def _connect_in_time(connection: Any, deadline: _Deadline, connect: Callable[[], Any]) -> Any:
    """``connect()`` (urllib3's) to each address of the host in turn, each attempt given
    what is left of the deadline: urllib3 gives every address the whole connect timeout,
    so a name with many silent addresses would hold a fetch for as many timeouts."""
    from urllib3.exceptions import ConnectTimeoutError
    from urllib3.util.connection import allowed_gai_family

    host = connection._dns_host
    try:
        infos = socket.getaddrinfo(host, connection.port, allowed_gai_family(), socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return connect()  # urllib3 says why in its own words
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    failed: ConnectTimeoutError | None = None
    try:
        for address in addresses:
            if deadline.passed:
                break
            connection._dns_host = address  # an address resolves to itself
            connection.timeout = max(deadline.remaining(), 0.001)
            try:
                return connect()
            except ConnectTimeoutError as exc:  # NewConnectionError too: the next address
                failed = exc
    finally:
        connection._dns_host = host
    if failed is None:
        raise ConnectTimeoutError(connection, f"Connection to {connection.host} timed out")
    raise failed


_SSL_TEXT = re.compile(r"\[[^\]]*\] (.*?)(?: \(_ssl\.c:\d+\))?$")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps: causes, contexts, urllib3's ``reason`` and exceptions
    in ``args`` (requests and urllib3 nest the real error three or four deep)."""
    found: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        reason = getattr(current, "reason", None)
        inner = [current.__cause__, current.__context__, reason, *current.args]
        todo.extend(e for e in inner if isinstance(e, BaseException))
    return found


def plain_error(exc: BaseException, timeout: float) -> str:
    """What went wrong with a fetch, as a person would say it ("connection refused", "TLS
    handshake failed: certificate has expired"), not urllib3's pool and retry wrappers."""
    import ssl
    from http.client import BadStatusLine, IncompleteRead, RemoteDisconnected

    from urllib3.exceptions import ConnectTimeoutError, ReadTimeoutError

    chain = _chain(exc)

    def first(kind: type[BaseException] | tuple[type[BaseException], ...]) -> Any:
        return next((e for e in chain if isinstance(e, kind)), None)

    if (cert := first(ssl.SSLCertVerificationError)) is not None:
        reason = cert.verify_message or cert.reason or "the certificate was not accepted"
        return f"TLS handshake failed: certificate verify failed: {reason}"
    if (tls := first(ssl.SSLError)) is not None:
        text = str(tls.args[1]) if len(tls.args) > 1 else str(tls)
        match = _SSL_TEXT.match(text)
        return f"TLS handshake failed: {match.group(1) if match else text}"
    if first(ConnectionRefusedError) is not None:
        return "connection refused"
    if first(RemoteDisconnected) is not None:
        return "the server closed the connection without answering"
    if first(ConnectionResetError) is not None:
        return "connection reset by the server"
    if first(socket.gaierror) is not None:
        return "cannot resolve host"
    if first((ConnectTimeoutError, ReadTimeoutError, TimeoutError)) is not None:
        return f"timed out after {timeout:g}s"
    if (bad := first(BadStatusLine)) is not None:
        return f"the server did not answer in HTTP (it sent {str(bad)[:40]!r})"
    if first(IncompleteRead) is not None or "Connection broken" in str(exc):
        return "the connection broke before the whole page came"
    if (os_error := first(OSError)) is not None and os_error.strerror:
        return str(os_error.strerror).lower()
    root = chain[-1]
    return f"{type(root).__name__}: {root}" if str(root) else type(root).__name__


def _guarded_session(policy: WebPolicy, deadline: _Deadline | None = None) -> Any:
    """A requests session whose every new connection checks the address it reached (and
    is shut at the ``deadline``)."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def checked(connection: Any, sock: Any) -> Any:
        if deadline is not None:
            deadline.watch(sock)
        if not policy.allows(connection.host):
            reason = refused_address(sock.getpeername()[0])
            if reason:
                sock.close()
                raise WebImportError(f"refused: '{connection.host}' connected to a {reason}")
        return sock

    def connected(connection: Any, connect: Callable[[], Any]) -> Any:
        if deadline is None:
            return checked(connection, connect())
        return checked(connection, _connect_in_time(connection, deadline, connect))

    class GuardedHTTP(HTTPConnection):
        def _new_conn(self) -> Any:
            return connected(self, super()._new_conn)

    class GuardedHTTPS(HTTPSConnection):
        def _new_conn(self) -> Any:
            return connected(self, super()._new_conn)

    class GuardedHTTPPool(HTTPConnectionPool):
        ConnectionCls = GuardedHTTP

    class GuardedHTTPSPool(HTTPSConnectionPool):
        ConnectionCls = GuardedHTTPS

    class GuardedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {
                "http": GuardedHTTPPool,
                "https": GuardedHTTPSPool,
            }

    session = requests.Session()
    session.trust_env = False  # a proxy from the environment would hide the real peer
    session.mount("http://", GuardedAdapter())
    session.mount("https://", GuardedAdapter())
    session.headers["User-Agent"] = policy.user_agent
    return session


def request(
    url: str,
    policy: WebPolicy,
    headers: dict[str, str] | None = None,
    accept: Callable[[str], bool] | None = None,
    follow_redirects: bool = True,
) -> FetchedPage:
    """GET ``url`` following at most ``max_redirects`` redirects, each hop checked; any
    final status is returned (a body only with a 2xx whose content type ``accept`` takes).
    Without ``follow_redirects`` a redirect comes back as it is, its ``location`` set.
    The whole of it, redirects included, ends by ``policy.timeout`` or fails."""
    import requests

    deadline = _Deadline(policy.timeout)
    session = _guarded_session(policy, deadline)
    current = url
    try:
        for _ in range(policy.max_redirects + 1):
            check_url(current, policy)
            if deadline.passed:
                raise deadline.error(url, current)
            try:
                response = session.get(
                    current,
                    headers=headers,
                    allow_redirects=False,
                    stream=True,
                    timeout=deadline.timeouts(),
                )
            except WebImportError as exc:  # raised by a guarded connection
                raise WebImportError(f"{current}: {exc}") from exc
            except requests.RequestException as exc:
                if deadline.passed:
                    raise deadline.error(url, current) from None
                reason = plain_error(exc, policy.timeout)
                raise WebImportError(f"{current}: {reason}") from exc
            with response:
                if response.is_redirect:
                    location = urljoin(current, response.headers.get("Location", ""))
                    if follow_redirects:
                        current = location
                        continue
                    status = response.status_code
                    return FetchedPage(current, "", b"", _now(), status, location=location)
                content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
                content_type = content_type.lower()
                status = response.status_code
                body = b""
                if 200 <= status < 300 and (accept is None or accept(content_type)):
                    try:
                        body = _read_capped(response, current, policy, deadline, url)
                    except (requests.RequestException, OSError) as exc:
                        if deadline.passed:
                            raise deadline.error(url, current) from None
                        reason = plain_error(exc, policy.timeout)
                        raise WebImportError(
                            f"{current}: reading the page failed: {reason}"
                        ) from exc
                return FetchedPage(
                    current,
                    content_type,
                    body,
                    _now(),
                    status=status,
                    etag=response.headers.get("ETag"),
                    last_modified=response.headers.get("Last-Modified"),
                )
        raise WebImportError(f"{url}: more than {policy.max_redirects} redirects")
    finally:
        deadline.cancel()
        session.close()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def fetch(url: str, policy: WebPolicy, headers: dict[str, str] | None = None) -> FetchedPage:
    """GET ``url`` (redirects followed, each hop checked); an error status is an error,
    except 304 Not Modified, the answer to a conditional request (``headers``)."""
    page = request(url, policy, headers)
    if page.status >= 400:
        raise WebImportError(f"{page.url}: HTTP {page.status}")
    return page


def _read_capped(
    response: Any, url: str, policy: WebPolicy, deadline: _Deadline, asked: str
) -> bytes:
    """The body of ``url`` (``asked`` before redirects), refused past the byte cap (or cut
    there, with ``policy.truncate``) or past the deadline (checked between chunks too)."""
    max_bytes = policy.max_bytes
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes and not policy.truncate:
        size = int(declared)
        raise WebImportError(f"{url}: the page is {size:,} bytes, over the {max_bytes:,}-byte cap")
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(64 * 1024):
        if deadline.passed:
            raise deadline.error(asked, url)
        size += len(chunk)
        if size > max_bytes:
            if policy.truncate:
                chunks.append(chunk[: len(chunk) - (size - max_bytes)])
                break
            raise WebImportError(f"{url}: the page is over the {max_bytes:,}-byte cap")
        chunks.append(chunk)
    return b"".join(chunks)


def _file_suffix(content_type: str) -> str | None:
    """The file suffix a parser reads pages of this type as (``application/pdf`` → .pdf)."""
    from flexmatch.inputs.parsing import SUPPORTED_SUFFIXES

    suffix = mimetypes.guess_extension(content_type) if content_type else None
    return suffix if suffix in SUPPORTED_SUFFIXES else None


def parseable(content_type: str) -> bool:
    """Whether ``parse_page`` can read a page of this content type."""
    return (
        content_type in HTML_TYPES
        or content_type.startswith("text/")
        or _file_suffix(content_type) is not None
    )


def parse_page(page: FetchedPage) -> ParsedDocument:
    """The main content of a fetched page: HTML, plain text, or a file type a parser
    reads (PDF, Word, …)."""
    from flexmatch.inputs.parsing import parse_file, parse_text
    from flexmatch.inputs.parsing.html import parse_html_bytes

    suffix = _file_suffix(page.content_type)
    if page.content_type in HTML_TYPES:
        parsed = parse_html_bytes(page.body, base_title=page.url)
    elif page.content_type.startswith("text/"):
        parsed = parse_text(page.body.decode("utf-8", errors="replace"), title=page.url)
    elif suffix is not None:
        stem = Path(urlsplit(page.url).path).stem[:80] or "page"
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"{stem}{suffix}"
            path.write_bytes(page.body)
            try:
                parsed = parse_file(path)
            except FlexMatchError as exc:  # named by its URL, not the temporary file
                raise type(exc)(str(exc).replace(str(path), page.url)) from None
    else:
        kind = page.content_type
        raise UnsupportedFormatError(f"{page.url}: cannot import content of type '{kind}'")
    metadata = {
        **parsed.metadata,
        "url": page.url,
        "fetched_at": page.fetched_at,
        **page.validators,
    }
    return parsed.model_copy(update={"metadata": metadata})


def page_document(parsed: ParsedDocument, *, document_id: str, uri: str, source: str) -> Document:
    """A fetched page's document: its title first (the URL when it has none)."""
    elements = parsed.elements
    if parsed.title and not any(e.kind == "title" for e in elements):
        elements = [Element(kind="title", text=parsed.title), *elements]
    return Document(
        id=document_id,
        uri=uri,
        source=source,
        title=parsed.title or parsed.metadata.get("url") or uri,
        elements=elements,
        metadata=parsed.metadata,
    )


# -- crawling: links, robots meta tags, sitemaps (run in worker processes) ----------------
_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_url(url: str) -> str | None:
    """``url`` in one spelling (scheme and host lower case, default port, credentials and
    fragment dropped, an empty path as ``/``), or None when it is not an http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


@dataclass(frozen=True)
class CrawledPage:
    """A fetched page read for a crawl: its content (None: ``noindex``, or ``error``) and
    the links to follow (none for ``nofollow``)."""

    parsed: ParsedDocument | None
    links: list[str] = field(default_factory=list)
    error: str | None = None
    empty: bool = False  # no text of its own (a page of links): nothing to import, no error
    more_links: bool = False  # the page had more links than were kept


MAX_LINKS = 1_000  # links kept from one page, unless the caller says otherwise


def read_crawled(page: FetchedPage, max_links: int = MAX_LINKS) -> CrawledPage:
    """Links (``<a href>``, ``<link rel=canonical>``; the first ``max_links``), then the
    main content: a page whose content cannot be read (an index of links only, say) still
    gives its links."""
    links, index, follow, more = _links_and_directives(page, max_links)
    if not follow:
        links, more = [], False
    if not index:
        return CrawledPage(None, links, more_links=more)
    try:
        parsed = parse_page(page)
    except EmptyDocumentError as exc:
        return CrawledPage(None, links, str(exc), empty=True, more_links=more)
    except FlexMatchError as exc:
        return CrawledPage(None, links, str(exc), more_links=more)
    return CrawledPage(parsed, links, more_links=more)


def _links_and_directives(
    page: FetchedPage, max_links: int = MAX_LINKS
) -> tuple[list[str], bool, bool, bool]:
    """(links, index, follow, more) of an HTML page: its first ``max_links`` distinct
    links (``more``: it had others), and what its robots meta tags say of index and
    follow. Links are gathered only up to the cap, so a page of a quarter of a million
    links costs no more than one of ``max_links``."""
    if page.content_type not in HTML_TYPES or not page.body.strip():
        return [], True, True, False
    import lxml.html
    from lxml import etree

    try:
        root = lxml.html.document_fromstring(page.body)
    except (etree.ParserError, ValueError):
        return [], True, True, False
    directives: set[str] = set()
    for meta in root.iter("meta"):
        if (meta.get("name") or "").strip().lower() in ("robots", ROBOT_NAME.lower()):
            content = (meta.get("content") or "").lower()
            directives.update(word.strip() for word in content.split(","))
    base = page.url
    for element in root.iter("base"):
        if element.get("href"):
            base = urljoin(page.url, element.get("href", "").strip())
            break
    links: dict[str, None] = {}  # in page order, each once
    more = False
    for element in root.iter("a", "link"):
        href = (element.get("href") or "").strip()
        rel = (element.get("rel") or "").lower().split()
        if not href or (element.tag == "link" and "canonical" not in rel):
            continue
        url = normalise_url(urljoin(base, href))
        if url is None or url in links:
            continue
        if len(links) >= max_links:
            more = True
            break
        links[url] = None
    index = not directives & {"noindex", "none"}
    follow = not directives & {"nofollow", "none"}
    return list(links), index, follow, more


def sitemap_urls(body: bytes, max_bytes: int) -> tuple[list[str], list[str]]:
    """(pages, sitemaps) a sitemap (or sitemap index) lists; gzip-compressed or not.
    Entities are never expanded, no DTD or network is read."""
    from lxml import etree

    if body[:2] == b"\x1f\x8b":
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        body = inflate.decompress(body, max_bytes)
        if inflate.unconsumed_tail:
            raise ParseError(f"the sitemap is over the {max_bytes:,}-byte cap unpacked")
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, recover=True
    )
    try:
        root = etree.fromstring(body, parser)
    except etree.XMLSyntaxError as exc:
        raise ParseError(f"the sitemap is not XML: {exc}") from None
    pages: list[str] = []
    sitemaps: list[str] = []
    if root is None:
        return pages, sitemaps
    for loc in root.iter("{*}loc"):
        parent = loc.getparent()
        kind = etree.QName(parent).localname if parent is not None else ""
        url = normalise_url(loc.text or "")
        if url is not None and kind in ("url", "sitemap"):
            (pages if kind == "url" else sitemaps).append(url)
    return pages, sitemaps
