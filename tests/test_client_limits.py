"""The client bounds a whole request's time and an answer's size, against a real (tiny,
hostile) server on 127.0.0.1: one that trickles its answer a byte at a time, one that
sends far more than the cap, with and without saying so in Content-Length."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from flexmatch import Client, ConfigError, ServiceError
from flexmatch.client.limits import MAX_ANSWER_BYTES

STATS = (
    b'{"tenant":"t","documents":0,"incomplete_documents":0,"chunks":0,'
    b'"matching_texts":0,"sources":{},"store_bytes":null}'
)
BIG = 256 * 1024 * 1024  # what the flooding server would send in all
CAP = 1024 * 1024
PAUSE = 0.2  # seconds between the trickling server's bytes
TRICKLE_SECONDS = len(STATS) * PAUSE  # the shortest trickle below (the body alone): ~26 s


class RawServer:
    """A one-thread socket server on 127.0.0.1: ``answer`` writes whatever it likes to
    each connection, after the request's headers are read; ``sent`` counts its bytes."""

    def __init__(self, answer: Callable[[socket.socket, RawServer], None]) -> None:
        self.answer = answer
        self.sent = 0
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                request = b""
                while b"\r\n\r\n" not in request:
                    data = conn.recv(65536)
                    if not data:
                        break
                    request += data
                with contextlib.suppress(OSError):  # the client hung up, as it should
                    self.answer(conn, self)

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)


@contextmanager
def serving(answer: Callable[[socket.socket, RawServer], None]) -> Iterator[RawServer]:
    server = RawServer(answer)
    server.thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.thread.join(10)
        server.listener.close()


def trickle(data: bytes, pause: float = PAUSE) -> Callable[[socket.socket, RawServer], None]:
    def answer(conn: socket.socket, server: RawServer) -> None:
        for byte in data:
            if server.stop.is_set():
                return
            server.send(conn, bytes([byte]))
            time.sleep(pause)

    return answer


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"


def flood(content_length: bool) -> Callable[[socket.socket, RawServer], None]:
    """An answer of ``BIG`` bytes, sent as fast as the client takes it."""

    def answer(conn: socket.socket, server: RawServer) -> None:
        head = HEAD % BIG if content_length else b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
        server.send(conn, head)
        block = b"x" * 65536
        while server.sent < BIG and not server.stop.is_set():
            server.send(conn, block)

    return answer


def timed(call: Callable[[], object]) -> tuple[float, BaseException]:
    started = time.monotonic()
    with pytest.raises(ServiceError) as failed:
        call()
    return time.monotonic() - started, failed.value


def stats_call(client: Client, mode: str) -> tuple[float, BaseException]:
    """``client.stats`` (``sync``) or ``astats`` (``async``, the pool closed after),
    timed: the seconds it took and what it raised."""
    if mode == "sync":
        return timed(client.stats)

    async def run() -> None:
        try:
            await client.astats()
        finally:
            await client.aclose()

    return timed(lambda: asyncio.run(run()))


@pytest.mark.parametrize("where", ["body", "headers"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_timeout_bounds_the_whole_request_against_a_trickle(where: str, mode: str) -> None:
    """Each byte comes well within httpx's per-read timeout, so only a deadline over the
    whole request stops it (before: the whole trickle, ~40 s for this answer)."""
    answer = (HEAD % len(STATS)) + STATS
    if where == "body":
        head, body = answer.split(b"\r\n\r\n", 1)

        def send(conn: socket.socket, server: RawServer) -> None:
            server.send(conn, head + b"\r\n\r\n")
            trickle(body)(conn, server)

    with serving(send if where == "body" else trickle(answer)) as server:
        client = Client(server.url, "key", timeout=1)
        took, error = stats_call(client, mode)
        client.close()
    assert isinstance(error, ServiceError) and error.code == "deadline_exceeded"
    assert "timeout=1s" in str(error) and server.url in str(error)
    # never before the deadline; after it, well short of the whole trickle (the bound
    # leaves a loaded machine room to schedule the client, not a per-read timeout's worth)
    assert 0.9 <= took < TRICKLE_SECONDS / 4, took


@pytest.mark.parametrize("content_length", [True, False], ids=["content-length", "streamed"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_answer_over_the_cap_is_refused_unread(content_length: bool, mode: str) -> None:
    with serving(flood(content_length)) as server:
        client = Client(server.url, "key", timeout=30, max_answer_bytes=CAP)
        _, error = stats_call(client, mode)
        client.close()
        server.stop.set()
        server.thread.join(10)
    assert isinstance(error, ServiceError) and error.code == "answer_too_large"
    assert "max_answer_bytes=1,048,576" in str(error)
    if content_length:
        assert f"says it is {BIG:,} bytes" in str(error)
    # the client stopped reading: the server could send no more than the socket buffers
    assert server.sent < BIG // 8, server.sent


def test_limits_are_checked_when_the_client_is_made() -> None:
    assert Client("http://127.0.0.1:1", "k").max_answer_bytes == MAX_ANSWER_BYTES
    with pytest.raises(ConfigError, match="timeout=0"):
        Client("http://127.0.0.1:1", "k", timeout=0)
    with pytest.raises(ConfigError, match="max_answer_bytes=0"):
        Client("http://127.0.0.1:1", "k", max_answer_bytes=0)
