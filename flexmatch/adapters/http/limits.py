"""Limits that keep one client from hurting the others: body size, rate, query length.

The body cap is an ASGI middleware, so it holds before any route parses a byte: a
declared ``Content-Length`` over the cap is refused at once, and a streamed (chunked)
body is counted as it arrives and cut off when it passes the cap.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flexmatch import MAX_QUERY_CHARS
from flexmatch.adapters.http.errors import error_body


@dataclass(frozen=True)
class Limits:
    """What one server allows; every field has a sensible default for a small team."""

    max_body_bytes: int = 64 * 1024 * 1024  # a bulk upload of several documents
    max_query_chars: int = MAX_QUERY_CHARS  # the tools' limit, unless the server sets its own
    rate_per_second: float = 10.0  # sustained requests per key; 0 turns the limit off
    burst: int = 30  # requests a key may make at once before the rate applies
    cache_entries: int = 1_024
    cache_ttl_seconds: float = 300.0
    max_urls_per_request: int = 100
    max_records_per_request: int = 1_000
    jobs_kept: int = 1_000  # finished jobs remembered for GET /v1/jobs/{id}
    sync_check_seconds: float = 5.0  # how often the scheduler looks for sources due a sync

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1 or self.max_query_chars < 1:
            raise ValueError("max_body_bytes and max_query_chars must be positive")
        if self.rate_per_second < 0 or self.burst < 1:
            raise ValueError("rate_per_second must be >= 0 and burst >= 1")
        if self.sync_check_seconds <= 0:
            raise ValueError("sync_check_seconds must be positive")


class RateLimiter:
    """A token bucket per key, in memory: ``burst`` tokens, refilled at ``rate`` per second.

    At most ``max_entries`` buckets are kept, the least recently used dropped first (one
    dropped that long ago had mostly refilled anyway), so many keys cannot grow it."""

    def __init__(
        self,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 100_000,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.max_entries = max_entries
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, last
        self._lock = threading.Lock()

    def acquire(self, key: str) -> float:
        """Take one token: 0 when allowed, else the seconds until one is available."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            taken = tokens >= 1.0
            self._buckets[key] = (tokens - 1.0 if taken else tokens, now)
            self._buckets.move_to_end(key)
            while len(self._buckets) > self.max_entries:
                self._buckets.popitem(last=False)
            return 0.0 if taken else (1.0 - tokens) / self.rate

    def __len__(self) -> int:
        return len(self._buckets)


def retry_after(seconds: float) -> str:
    """A ``Retry-After`` value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a streamed body passes the cap.

    An ``HTTPException`` so FastAPI's body parsing re-raises it instead of turning it
    into a generic 400.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over the {limit:,}-byte limit")


class BodySizeLimitMiddleware:
    """Refuse request bodies over ``max_bytes`` with a JSON 413."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            error_body(
                "body_too_large", f"the request body is over the {self.max_bytes:,}-byte limit"
            )
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
