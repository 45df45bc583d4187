"""The web rules every fetch keeps (``WebPolicy``), and the guarded connections that
hold each socket to them.

Only http and https. Loopback, private, link-local, multicast, reserved and unspecified
addresses (IPv4 and IPv6, IPv4-mapped forms included) are refused, for the names a URL
resolves to on every redirect hop (``check_url``) *and* for the address each connection
actually reaches (``guarded_session``: so a name that re-resolves between check and
connect is still caught). Hosts on an explicit allow-list are exempt. The deadline is
wall-clock time for the whole fetch (connect, headers and body of every redirect hop):
a watchdog (``FetchDeadline``) shuts the fetch's sockets at the deadline, because
requests' own timeouts are per socket read, so a server sending a byte a second would
never trip them. Name resolution is not under the watchdog.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from flexmatch.errors import WebImportError

ROBOT_NAME = "FlexMatch"  # the product token robots.txt rules name
USER_AGENT = f"{ROBOT_NAME}/0.1 (knowledge-base import)"


@dataclass(frozen=True)
class WebPolicy:
    """One source's web rules: the hosts exempt from the address guard, the deadline of
    one fetch (seconds, redirects included), the redirect limit and the byte cap."""

    allow_hosts: frozenset[str] = frozenset()
    timeout: float = 15.0
    max_redirects: int = 5
    max_bytes: int = 10_000_000
    user_agent: str = USER_AGENT
    truncate: bool = False  # past max_bytes keep the first max_bytes (robots.txt), not refuse

    def allows(self, host: str) -> bool:
        return host.lower().strip("[]") in self.allow_hosts


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


class FetchDeadline:
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


def _connect_in_time(connection: Any, deadline: FetchDeadline, connect: Callable[[], Any]) -> Any:
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


def guarded_session(policy: WebPolicy, deadline: FetchDeadline | None = None) -> Any:
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
