"""One web fetch: GET a URL with ``requests`` under the source's web rules
(``web_policy``: the address guard on every redirect hop and connection, one deadline
for the whole fetch), redirects followed hop by hop, the body read up to the byte cap,
and any failure one plain line (``WebImportError``: "connection refused", not urllib3's
wrappers). The deadline is kept by the fetch itself, whoever calls it.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin

from flexmatch.errors import WebImportError
from flexmatch.inputs.sources.web_policy import FetchDeadline, WebPolicy, check_url, guarded_session


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

    deadline = FetchDeadline(policy.timeout)
    session = guarded_session(policy, deadline)
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
    response: Any, url: str, policy: WebPolicy, deadline: FetchDeadline, asked: str
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
