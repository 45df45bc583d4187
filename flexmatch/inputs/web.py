"""Web import: fetch a page with ``requests`` under safety rules, keep its main content.

Only http and https. Loopback, private, link-local, multicast, reserved and unspecified
addresses (IPv4 and IPv6, IPv4-mapped forms included) are refused, for the names a URL
resolves to on every redirect hop *and* for the address each connection actually reaches
(so a name that re-resolves between check and connect is still caught). Hosts on an
explicit allow-list are exempt. Timeouts, a redirect limit and a byte cap bound every fetch.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

from flexmatch.errors import UnsupportedFormatError, WebImportError
from flexmatch.models import ParsedDocument

USER_AGENT = "FlexMatch/0.1 (knowledge-base import)"


@dataclass(frozen=True)
class WebPolicy:
    allow_hosts: frozenset[str] = frozenset()
    timeout: float = 15.0
    max_redirects: int = 5
    max_bytes: int = 10_000_000
    user_agent: str = USER_AGENT

    def allows(self, host: str) -> bool:
        return host.lower().strip("[]") in self.allow_hosts


@dataclass(frozen=True)
class FetchedPage:
    url: str
    content_type: str
    body: bytes
    fetched_at: str


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
        raise WebImportError(f"{url}: cannot resolve host '{host}': {exc}") from exc
    for info in infos:
        reason = refused_address(str(info[4][0]))
        if reason:
            raise WebImportError(
                f"{url}: refused: '{host}' is a {reason} (allow it with the source's allow_hosts)"
            )
    return host


def _guarded_session(policy: WebPolicy) -> Any:
    """A requests session whose every new connection checks the address it reached."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def checked(connection: Any, sock: Any) -> Any:
        if not policy.allows(connection.host):
            reason = refused_address(sock.getpeername()[0])
            if reason:
                sock.close()
                raise WebImportError(f"refused: '{connection.host}' connected to a {reason}")
        return sock

    class GuardedHTTP(HTTPConnection):
        def _new_conn(self) -> Any:
            return checked(self, super()._new_conn())

    class GuardedHTTPS(HTTPSConnection):
        def _new_conn(self) -> Any:
            return checked(self, super()._new_conn())

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


def fetch(url: str, policy: WebPolicy) -> FetchedPage:
    """GET ``url`` following at most ``max_redirects`` redirects, each hop checked."""
    import requests

    session = _guarded_session(policy)
    current = url
    try:
        for _ in range(policy.max_redirects + 1):
            check_url(current, policy)
            try:
                response = session.get(
                    current,
                    allow_redirects=False,
                    stream=True,
                    timeout=(policy.timeout, policy.timeout),
                )
            except WebImportError as exc:  # raised by a guarded connection
                raise WebImportError(f"{current}: {exc}") from exc
            except requests.RequestException as exc:
                raise WebImportError(f"{current}: fetch failed: {exc}") from exc
            with response:
                if response.is_redirect:
                    location = response.headers.get("Location", "")
                    current = urljoin(current, location)
                    continue
                if response.status_code >= 400:
                    raise WebImportError(f"{current}: HTTP {response.status_code}")
                try:
                    body = _read_capped(response, current, policy)
                except requests.RequestException as exc:
                    raise WebImportError(f"{current}: reading the page failed: {exc}") from exc
                content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
                fetched_at = datetime.now(UTC).isoformat(timespec="seconds")
                return FetchedPage(current, content_type.lower(), body, fetched_at)
        raise WebImportError(f"{url}: more than {policy.max_redirects} redirects")
    finally:
        session.close()


def _read_capped(response: Any, url: str, policy: WebPolicy) -> bytes:
    """The body, refused past the byte cap or past the time allowed (a server that trickles
    bytes must not hold a fetch open for ever; the worker running a fetch is also killed
    at the deadline, which covers a read that never returns)."""
    max_bytes = policy.max_bytes
    deadline = time.monotonic() + policy.timeout
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        size = int(declared)
        raise WebImportError(f"{url}: the page is {size:,} bytes, over the {max_bytes:,}-byte cap")
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(64 * 1024):
        if time.monotonic() > deadline:
            raise WebImportError(f"{url}: the page took longer than {policy.timeout:g}s")
        size += len(chunk)
        if size > max_bytes:
            raise WebImportError(f"{url}: the page is over the {max_bytes:,}-byte cap")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_page(page: FetchedPage) -> ParsedDocument:
    """The main content of a fetched page (HTML or plain text)."""
    from flexmatch.inputs.parsing import parse_text
    from flexmatch.inputs.parsing.html import parse_html_bytes

    if page.content_type in ("text/html", "application/xhtml+xml", ""):
        parsed = parse_html_bytes(page.body, base_title=page.url)
    elif page.content_type.startswith("text/"):
        parsed = parse_text(page.body.decode("utf-8", errors="replace"), title=page.url)
    else:
        kind = page.content_type
        raise UnsupportedFormatError(f"{page.url}: cannot import content of type '{kind}'")
    metadata = {**parsed.metadata, "url": page.url, "fetched_at": page.fetched_at}
    return parsed.model_copy(update={"metadata": metadata})
