"""What bounds one request of the client: a deadline over the whole of it (connect, send,
read) and a cap on the size of its answer, read as it streams in.

httpx's timeouts bound each socket operation: a server that sends a byte a second never
trips them. The blocking driver's sockets therefore read with what is left of the
request's deadline (``DeadlineBackend``, set per request in ``DEADLINE``); the async
driver runs the request under ``asyncio.timeout``.
"""

from __future__ import annotations

import ssl
import time
import typing
from contextvars import ContextVar

import httpcore
import httpx

from flexmatch.errors import ServiceError

MAX_ANSWER_BYTES = 64 * 1024 * 1024  # an answer larger than this is refused, unread
DEADLINE: ContextVar[float | None] = ContextVar("flexmatch_client_deadline", default=None)


def _left(timeout: float | None) -> float | None:
    """``timeout`` cut to what is left of the request's deadline (none set: as given)."""
    deadline = DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        tls = self._stream.start_tls(ssl_context, server_hostname, _left(timeout))
        return _DeadlineStream(tls)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """The blocking network backend, each socket operation bounded by what is left of
    the request's deadline (so a trickle of bytes runs out of time too)."""

    def __init__(self, backend: httpcore.NetworkBackend | None = None) -> None:
        self._backend = backend or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        left = _left(timeout)
        stream = self._backend.connect_tcp(host, port, left, local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._backend.connect_unix_socket(path, _left(timeout), socket_options)
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def bounded_transport() -> httpx.HTTPTransport:
    """httpx's own transport, its connections made by ``DeadlineBackend``. httpx takes
    no network backend, so it is set on the connection pool httpx builds (the attribute
    is checked: an httpx that moved it fails here, at once, not silently)."""
    transport = httpx.HTTPTransport()
    pool = transport._pool
    if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError("this httpx version builds its connection pool differently")
    pool._network_backend = DeadlineBackend(pool._network_backend)
    return transport


class AnswerReader:
    """An answer's body read as it streams, refused once it is over ``limit`` bytes (or
    says it will be, in its Content-Length) and once the request's deadline passes."""

    def __init__(self, response: httpx.Response, limit: int, deadline: float) -> None:
        self.response = response
        self.limit = limit
        self.deadline = deadline
        self.parts: list[bytes] = []
        self.size = 0
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self.too_large(f"it says it is {int(declared):,} bytes")

    def too_large(self, why: str) -> ServiceError:
        url = self.response.request.url
        return ServiceError(
            self.response.status_code,
            "answer_too_large",
            f"{url}: the answer is over the client's max_answer_bytes={self.limit:,} "
            f"({why}); the rest was not read",
        )

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            raise self.too_large(f"{self.size:,} bytes read so far")
        if time.monotonic() > self.deadline:
            raise httpx.ReadTimeout("the request's deadline has passed")
        self.parts.append(chunk)

    def answer(self) -> httpx.Response:
        """The answer with its whole (decoded) body, as a non-streamed httpx response."""
        headers = [
            (name, value)
            for name, value in self.response.headers.raw
            if name.lower() not in (b"content-encoding", b"content-length", b"transfer-encoding")
        ]
        return httpx.Response(
            self.response.status_code,
            headers=headers,
            content=b"".join(self.parts),
            request=self.response.request,
            extensions=self.response.extensions,
        )


def late(url: str, timeout: float) -> ServiceError:
    """The error of a request that did not end by its deadline."""
    return ServiceError(
        0,
        "deadline_exceeded",
        f"{url}: no whole answer within the client's timeout={timeout:g}s "
        "(it bounds each request: connect, send and the whole answer)",
    )
