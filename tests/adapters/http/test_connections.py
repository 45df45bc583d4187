"""Slow and numerous connections take no one else's place (``service.connections``).

A real ``flexmatch serve`` runs with small caps and a short request-head deadline. One
client address holding hundreds of half-sent requests gets a 503 past its cap, while
``/health`` keeps answering another address at once; the total cap holds across
addresses; a client that trickles its headers, or starts a second request on a kept-alive
connection and never finishes it, is closed at the deadline; and the log says so in a
line or two, never once per connection. Each test uses its own loopback addresses
(127.0.0.x), so their counts do not mix. The log filter and the limits' arithmetic are
checked without a server.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from flexmatch.adapters.http.connections import ConnectionLimits, RepeatFilter
from flexmatch.config import ConnectionsConfig
from tests.adapters.http.servers import free_port
from tests.conftest import stop, write_config

FLEXMATCH = Path(sys.executable).parent / "flexmatch"
# long enough that a loaded machine's slow answer is still told apart from one that
# waited for the deadline to free a held connection
HEADER_TIMEOUT = 5.0
PER_ADDRESS = 20
TOTAL = 60
HALF_SENT = 300  # from one address, far past PER_ADDRESS
# seconds for /health from another address meanwhile: before the deadline frees anything
HEALTH_WITHIN = HEADER_TIMEOUT - 1.0
CLOSED_WITHIN = HEADER_TIMEOUT + 10.0  # seconds for every half-sent connection to be closed
READY_WITHIN = 120.0
HALF_HEAD = b"GET /health HTTP/1.1\r\nHost: x\r\n"


@dataclass
class Server:
    port: int
    log: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``flexmatch serve`` with small caps and a ``HEADER_TIMEOUT`` deadline."""
    kb = tmp_path_factory.mktemp("connections") / "kb"
    write_config(
        kb,
        "service:\n  connections:\n"
        f"    header_timeout: {HEADER_TIMEOUT}\n"
        f"    per_address: {PER_ADDRESS}\n"
        f"    total: {TOTAL}\n"
        "    log_interval: 600\n",
    )
    port = free_port()
    log_path = kb.parent / "serve.log"
    command = [str(FLEXMATCH), "serve", "--kb", str(kb), "--port", str(port)]
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, text=True, env=_env()
        )
        try:
            deadline = time.monotonic() + READY_WITHIN
            while True:
                if process.poll() is not None:
                    raise AssertionError(f"serve exited:\n{log_path.read_text()[-2000:]}")
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health/ready").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, log_path.read_text()[-2000:]
                time.sleep(0.2)
            yield Server(port, log_path)
        finally:
            stop(process)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FLEXMATCH_KB"}
    return {**env, "HF_HUB_OFFLINE": "1"}


def _connect(server: Server, source: str, first: bytes = HALF_HEAD) -> socket.socket:
    sock = socket.create_connection(
        ("127.0.0.1", server.port), timeout=5, source_address=(source, 0)
    )
    sock.sendall(first)
    return sock


def _health(server: Server, source: str) -> tuple[bytes, float]:
    """A whole ``GET /health`` from ``source``: the status line and how long it took."""
    started = time.monotonic()
    request = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with _connect(server, source, request) as sock:
        status = _read_all(sock, timeout=10).split(b"\r\n", 1)[0]
    return status, time.monotonic() - started


def _read_all(sock: socket.socket, timeout: float) -> bytes:
    """What the server sends until it closes the connection, or after ``timeout``
    seconds, what it has sent so far."""
    sock.settimeout(0.2)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk
    return data


def _read_response(sock: socket.socket) -> bytes:
    """One whole response on a kept-alive connection: its head and body."""
    sock.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(4096)
    return data


def _status(sock: socket.socket, timeout: float) -> bytes:
    """The status line the server answered with before closing (b"" for none)."""
    return _read_all(sock, timeout).split(b"\r\n", 1)[0]


def _left(deadline: float) -> float:
    """Seconds to wait on one more connection before ``deadline`` (a little, past it)."""
    return max(0.2, deadline - time.monotonic())


def _lines(server: Server, text: str) -> int:
    return sum(text in line for line in server.log.read_text().splitlines())


@pytest.mark.slow
def test_one_address_holding_half_sent_requests_stops_no_one_else(server: Server) -> None:
    sockets = [_connect(server, "127.0.0.11") for _ in range(HALF_SENT)]
    try:
        status, took = _health(server, "127.0.0.12")
        assert status == b"HTTP/1.1 200 OK", status
        assert took < HEALTH_WITHIN, f"/health took {took:.2f} s"
        deadline = time.monotonic() + CLOSED_WITHIN
        statuses = [_status(sock, _left(deadline)) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
    refused = statuses.count(b"HTTP/1.1 503 Service Unavailable")
    timed_out = statuses.count(b"HTTP/1.1 408 Request Timeout")
    # the first PER_ADDRESS were held until the deadline, every other one refused at once
    assert (refused, timed_out) == (HALF_SENT - PER_ADDRESS, PER_ADDRESS), statuses
    assert _lines(server, "refused a connection from 127.0.0.11") == 1
    assert _lines(server, "Traceback") == 0


@pytest.mark.slow
def test_the_total_cap_holds_across_addresses(server: Server) -> None:
    sources = [f"127.0.0.{21 + i}" for i in range(TOTAL // PER_ADDRESS)]
    held = [_connect(server, source) for source in sources for _ in range(PER_ADDRESS)]
    try:
        with _connect(server, "127.0.0.30") as extra:
            assert _status(extra, 5) == b"HTTP/1.1 503 Service Unavailable"
        deadline = time.monotonic() + CLOSED_WITHIN
        statuses = {_status(sock, _left(deadline)) for sock in held}
        assert statuses == {b"HTTP/1.1 408 Request Timeout"}, statuses
    finally:
        for sock in held:
            sock.close()
    # the deadline freed them: a new client is served again
    deadline = time.monotonic() + 30
    while (status := _health(server, "127.0.0.30")[0]) != b"HTTP/1.1 200 OK":
        assert time.monotonic() < deadline, status
        time.sleep(0.1)


@pytest.mark.slow
def test_a_request_head_must_arrive_within_the_deadline(server: Server) -> None:
    # a client trickling one header line every 0.3 s is closed, although it never pauses
    # (at the deadline: the server's clock starts at its accept, a loaded moment before
    # this one's, hence the room below it)
    with _connect(server, "127.0.0.41") as trickle:
        started = time.monotonic()
        trickle.settimeout(0.3)
        answer = None
        while answer is None and time.monotonic() - started < CLOSED_WITHIN:
            try:
                trickle.sendall(b"X-a: b\r\n")
                answer = trickle.recv(4096)  # the server's answer, or b"" once it closed
            except TimeoutError:
                continue
            except OSError:
                answer = b""
        took = time.monotonic() - started
    assert answer is not None and answer.startswith(b"HTTP/1.1 408"), answer
    assert HEADER_TIMEOUT - 2.0 < took < CLOSED_WITHIN, took
    # a kept-alive connection is given the deadline again after each response
    with _connect(server, "127.0.0.42", b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n") as alive:
        assert _read_response(alive).startswith(b"HTTP/1.1 200 OK")
        alive.sendall(HALF_HEAD)
        started = time.monotonic()
        assert _status(alive, CLOSED_WITHIN) == b"HTTP/1.1 408 Request Timeout"
        assert time.monotonic() - started > HEADER_TIMEOUT - 2.0
    # a request sent whole within the deadline is answered as ever
    with _connect(server, "127.0.0.43", b"GET /health HTTP/1.1\r\n") as slow_but_in_time:
        time.sleep(HEADER_TIMEOUT / 4)  # a pause, well inside the deadline
        slow_but_in_time.sendall(b"Host: x\r\nConnection: close\r\n\r\n")
        assert _status(slow_but_in_time, 5) == b"HTTP/1.1 200 OK"
    assert _lines(server, "no complete request head within") <= 1


# -- without a server ------------------------------------------------------------------


def _record(message: str, error: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(error), error, None) if error is not None else None
    return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, None, exc_info)


def test_out_of_files_errors_are_logged_once_per_interval_without_a_traceback() -> None:
    now = [0.0]
    repeat = RepeatFilter(interval=60, clock=lambda: now[0])
    emfile = OSError(errno.EMFILE, "Too many open files")
    passed = [
        r
        for r in (_record("socket.accept() failed", emfile) for _ in range(1000))
        if repeat.filter(r)
    ]
    assert len(passed) == 1
    assert passed[0].exc_info is None
    assert passed[0].getMessage() == "socket.accept() failed: [Errno 24] Too many open files"
    now[0] = 61.0
    later = _record("socket.accept() failed", emfile)
    assert repeat.filter(later)
    assert "999 more like this in the last 60 s not logged" in later.getMessage()
    # anything else passes untouched
    other = _record("a job failed", ValueError("bad"))
    assert repeat.filter(other) and other.exc_info is not None


def test_the_limits_fit_the_open_file_limit() -> None:
    roomy = ConnectionLimits.from_config(ConnectionsConfig(), file_limit=1_048_576)
    assert (roomy.total, roomy.backlog, roomy.per_address) == (1_000, 2_048, 64)
    # the connections and one batch of accepts both fit in 1,024 files, with room to spare
    tight = ConnectionLimits.from_config(ConnectionsConfig(), file_limit=1_024)
    assert tight.total + tight.backlog <= 1_024 - 256
    # a configured total past the file limit is lowered
    lowered = ConnectionLimits.from_config(ConnectionsConfig(total=5_000), file_limit=1_024)
    assert lowered.total < 1_024 - 256
