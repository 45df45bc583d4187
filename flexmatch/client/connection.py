"""The client's connection: an operation, written once as a generator of HTTP requests
(or pauses while a job runs), driven with blocking I/O or on an event loop. A 429 or a
503 that says when to come back is waited out and sent again; a server that cannot be
reached is one ``ServiceError`` that says why. Each request is bounded as a whole: by
``timeout`` and by ``max_answer_bytes`` (``limits``)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Generator
from typing import Any, Self, TypeVar

import httpx

from flexmatch.access import Principal, principal_headers
from flexmatch.client.limits import (
    DEADLINE,
    MAX_ANSWER_BYTES,
    AnswerReader,
    bounded_transport,
    late,
)
from flexmatch.errors import ConfigError, ServiceError

T = TypeVar("T")
# a step of an operation: a request to send, or seconds to wait (a job is running)
Step = httpx.Request | float
Flow = Generator[Step, httpx.Response | None, T]

RETRIES = 4  # answers 429 or 503 with Retry-After, waited out before giving up
MAX_RETRY_WAIT = 30.0


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait before asking again, for a 429 or a 503 that says so."""
    if response.status_code not in (429, 503):
        return None
    header = response.headers.get("Retry-After")
    if header is None:
        return None if response.status_code == 503 else 1.0
    try:
        return min(MAX_RETRY_WAIT, max(0.0, float(header)))
    except ValueError:
        return 1.0


def _unreachable(url: str, exc: httpx.TransportError) -> ServiceError:
    """A transport failure said as a person would say it."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        why = "connection refused" if "refused" in text.lower() else f"cannot connect ({text})"
    else:
        why = text
    return ServiceError(0, "unreachable", f"{url}: {why}")


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


class Connection:
    """A served knowledge base's URL and API key, and the HTTP pools that reach it
    (``Client`` adds the operations)."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        job_timeout: float | None = None,
        poll_interval: float = 0.25,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
        principal: Principal | None = None,
    ) -> None:
        if not is_url(url):
            raise ConfigError(f"{url!r}: the server's URL must start with http:// or https://")
        if not timeout > 0:
            raise ConfigError(f"timeout={timeout!r}: a request needs more than 0 seconds")
        if max_answer_bytes < 1:
            raise ConfigError(f"max_answer_bytes={max_answer_bytes!r}: must be at least 1")
        self.url = url.rstrip("/")
        key = api_key if api_key is not None else os.environ.get("FLEXMATCH_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        # the end user a service key acts for (``X-FlexMatch-Principal``), on every request
        self.principal = principal
        self._headers |= principal_headers(principal)
        self.timeout = timeout
        self.job_timeout = job_timeout
        self.poll_interval = poll_interval
        self.max_answer_bytes = max_answer_bytes
        self._http = httpx.Client(
            base_url=self.url,
            headers=self._headers,
            timeout=timeout,
            transport=transport or bounded_transport(),
        )
        self._async_transport = async_transport
        self._ahttp: httpx.AsyncClient | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- driving an operation ------------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Request:
        return self._http.build_request(method, path, **kwargs)

    def _run(self, flow: Flow[T]) -> T:
        """Run an operation with blocking I/O."""
        reply: httpx.Response | None = None
        while True:
            try:
                step = flow.send(reply)
            except StopIteration as done:
                return done.value
            if isinstance(step, float):
                time.sleep(step)
                reply = None
                continue
            for _ in range(RETRIES + 1):
                reply = self._send(step)
                wait = _retry_after(reply)
                if wait is None:
                    break
                time.sleep(wait)

    def _send(self, request: httpx.Request) -> httpx.Response:
        """One request and its whole answer, with blocking I/O, within ``timeout`` (its
        sockets read with what is left of it) and ``max_answer_bytes``."""
        deadline = time.monotonic() + self.timeout
        token = DEADLINE.set(deadline)
        try:
            response = self._http.send(request, stream=True)
            try:
                body = AnswerReader(response, self.max_answer_bytes, deadline)
                for chunk in response.iter_bytes():
                    body.add(chunk)
                return body.answer()
            finally:
                response.close()
        except httpx.TimeoutException:
            raise late(self.url, self.timeout) from None
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from None
        finally:
            DEADLINE.reset(token)

    def _async_http(self) -> httpx.AsyncClient:
        """The async connection pool of the running event loop (a pool cannot outlive
        its loop, and sync callers may run each call in a loop of its own)."""
        loop = asyncio.get_running_loop()
        if self._ahttp is None or self._aloop is not loop:
            self._ahttp = httpx.AsyncClient(
                base_url=self.url,
                headers=self._headers,
                timeout=self.timeout,
                transport=self._async_transport,
            )
            self._aloop = loop
        return self._ahttp

    async def _arun(self, flow: Flow[T]) -> T:
        """Run an operation on the event loop."""
        http = self._async_http()
        reply: httpx.Response | None = None
        while True:
            try:
                step = flow.send(reply)
            except StopIteration as done:
                return done.value
            if isinstance(step, float):
                await asyncio.sleep(step)
                reply = None
                continue
            for _ in range(RETRIES + 1):
                reply = await self._asend(http, step)
                wait = _retry_after(reply)
                if wait is None:
                    break
                await asyncio.sleep(wait)

    async def _asend(self, http: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
        """One request and its whole answer on the event loop, within ``timeout`` (the
        whole of it runs under one ``asyncio.timeout``) and ``max_answer_bytes``."""
        deadline = time.monotonic() + self.timeout
        try:
            async with asyncio.timeout(self.timeout):
                response = await http.send(request, stream=True)
                try:
                    body = AnswerReader(response, self.max_answer_bytes, deadline)
                    async for chunk in response.aiter_bytes():
                        body.add(chunk)
                    return body.answer()
                finally:
                    await response.aclose()
        except (TimeoutError, httpx.TimeoutException):
            raise late(self.url, self.timeout) from None
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from None

    # -- housekeeping ------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    async def aclose(self) -> None:
        if self._ahttp is not None:
            await self._ahttp.aclose()
            self._ahttp = None
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
