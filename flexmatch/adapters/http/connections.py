"""Connections ``flexmatch serve`` accepts, and how long it waits for them.

uvicorn reads request heads for as long as a client cares to trickle them, and accepts
connections until the process runs out of open files: a single client holding thousands of
half-sent requests once made ``/health`` time out and filled the log with tens of thousands
of "Too many open files" tracebacks. This module bounds all three, in front of the app:

- ``GuardedH11Protocol``, uvicorn's h11 protocol with a deadline for each request head
  (``header_timeout``, armed when a connection opens and again after each response) and
  caps on open connections per client address and in total. A connection past a cap gets
  a minimal 503 and is closed at once, before it holds anything, so the server keeps
  answering everyone else.
- ``RepeatFilter``, a logging filter that lets one line per kind through per interval
  (refused connections, closed slow ones, running out of open files), without tracebacks.
- ``raise_file_limit``: the soft open-file limit raised to the hard one at start.

The counts are per server process (each worker of ``--workers`` keeps its own). The
server always speaks h11 through this class: httptools, when installed, is not used.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.utils import get_remote_addr

log = logging.getLogger("flexmatch.connections")

DEFAULT_TOTAL = 1_000
MAX_BACKLOG = 2_048  # uvicorn's default
MIN_BACKLOG = 64
# open files the process needs besides its connections: the store, the model, the state
# database, parser and fetch workers' pipes, log files
FILE_RESERVE = 256
_OUT_OF_FILES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_REPEAT = "flexmatch_repeat"  # LogRecord attribute naming a record's kind for RepeatFilter


def _response(status: str, text: str, *extra: bytes) -> bytes:
    """A whole, minimal HTTP/1.1 response that closes the connection."""
    body = f"{text}\n".encode()
    head = [
        f"HTTP/1.1 {status}".encode(),
        b"Content-Type: text/plain; charset=utf-8",
        f"Content-Length: {len(body)}".encode(),
        *extra,
        b"Connection: close",
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


_BUSY = _response("503 Service Unavailable", "too many open connections", b"Retry-After: 5")
_TOO_SLOW = _response("408 Request Timeout", "the request head took too long")


class ConnectionSettings(Protocol):
    """What ``service.connections`` of ``flexmatch.yaml`` says (read-only here)."""

    @property
    def header_timeout(self) -> float: ...
    @property
    def per_address(self) -> int: ...
    @property
    def total(self) -> int | None: ...
    @property
    def log_interval(self) -> float: ...


@dataclass(frozen=True)
class ConnectionLimits:
    """What one server process allows (``service.connections`` resolved at start)."""

    header_timeout: float = 10.0  # seconds for a complete request line and headers
    per_address: int = 64  # open connections per client address; 0: no cap
    total: int = DEFAULT_TOTAL  # open connections in all
    log_interval: float = 60.0  # seconds between two log lines of one kind
    # the listen backlog, which is also how many connections asyncio accepts in one go,
    # before any is counted: open connections plus one such batch must fit the file limit
    backlog: int = MAX_BACKLOG

    @classmethod
    def from_config(cls, config: ConnectionSettings, file_limit: int) -> ConnectionLimits:
        """The configured limits for a process that may open ``file_limit`` files.

        After ``FILE_RESERVE`` for the process's own files, the rest holds the open
        connections (``total``; unset, half of it, at most ``DEFAULT_TOTAL``) and one
        batch of accepts (``backlog``). A configured total the limit cannot hold is
        lowered, with a warning: past it, accepting fails with EMFILE for everyone instead
        of a 503 for the extra connections."""
        room = max(2 * MIN_BACKLOG, file_limit - FILE_RESERVE)
        total = config.total if config.total is not None else min(DEFAULT_TOTAL, room // 2)
        if total > room - MIN_BACKLOG:
            log.warning(
                "service.connections.total %d is more than the open-file limit (%d) leaves "
                "room for: using %d (raise the limit with ulimit -n, or LimitNOFILE= in a "
                "systemd unit)",
                total,
                file_limit,
                room - MIN_BACKLOG,
            )
            total = room - MIN_BACKLOG
        return cls(
            header_timeout=config.header_timeout,
            per_address=config.per_address,
            total=total,
            log_interval=config.log_interval,
            backlog=max(MIN_BACKLOG, min(MAX_BACKLOG, room - total)),
        )


def raise_file_limit() -> int:
    """Raise the soft open-file limit to the hard one; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # a hard limit of "unlimited" some kernels refuse
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


class ConnectionGuard:
    """Open connections counted per client address and in total (one event loop uses it,
    so no lock)."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.total = 0
        self.by_address: Counter[str] = Counter()

    def admit(self, address: str) -> str | None:
        """Count a new connection, or say why it is refused (and count nothing)."""
        if self.total >= self.limits.total:
            return f"the server holds {self.total} connections (service.connections.total)"
        cap = self.limits.per_address
        if cap and self.by_address[address] >= cap:
            return (
                f"{address} holds {self.by_address[address]} connections "
                "(service.connections.per_address)"
            )
        self.total += 1
        self.by_address[address] += 1
        return None

    def release(self, address: str) -> None:
        self.total -= 1
        self.by_address[address] -= 1
        if self.by_address[address] <= 0:
            del self.by_address[address]


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with connection caps and a request-head deadline.

    Pass the class as uvicorn's ``http`` (or its import path, for workers), after
    ``configure``. The deadline is a timer armed when the connection opens and after each
    response; when it fires, the connection is closed unless a request head arrived in the
    meantime (h11 then no longer waits in ``IDLE`` for the client).
    """

    guard: ClassVar[ConnectionGuard] = ConnectionGuard(ConnectionLimits())

    @classmethod
    def configure(cls, limits: ConnectionLimits) -> None:
        """Set this process's limits (before the server accepts a connection)."""
        cls.guard = ConnectionGuard(limits)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address: str | None = None  # set once the connection is admitted
        self._refused = False
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_started = False  # bytes of the awaited request head have arrived

    # [override]: as uvicorn's own H11Protocol, typed for the Transport asyncio gives it
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = get_remote_addr(transport)
        address = peer[0] if peer else "unknown"
        refusal = self.guard.admit(address)
        if refusal is not None:
            self._refused = True
            self.transport = transport
            log.warning(
                "refused a connection from %s: %s", address, refusal, extra={_REPEAT: "refused"}
            )
            transport.write(_BUSY)
            transport.close()
            return
        self._address = address
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        self._cancel_head_timer()
        if self._address is not None:
            self.guard.release(self._address)
            self._address = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        if self._awaiting_head():
            self._head_started = True
        else:
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_timer()

    def _awaiting_head(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_started = False
        self._head_timer = self.loop.call_later(
            self.guard.limits.header_timeout, self._head_timed_out
        )

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._awaiting_head():
            return
        if self._head_started:  # a client that began a request is told why; an idle one is not
            log.warning(
                "closed a connection from %s: no complete request head within %g s "
                "(service.connections.header_timeout)",
                self._address,
                self.guard.limits.header_timeout,
                extra={_REPEAT: "header-timeout"},
            )
            self.transport.write(_TOO_SLOW)
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()


@dataclass
class _Seen:
    since: float
    suppressed: int = 0


class RepeatFilter(logging.Filter):
    """One log line per kind per ``interval`` seconds, the others counted and dropped.

    A kind is a record's ``flexmatch_repeat`` attribute, or "out of open files" for any
    record about EMFILE/ENFILE (asyncio's failed accepts, and whatever else failed for
    want of a file). Those pass as one line, with the error but no traceback, and say how
    many like them were dropped since the last one. Other records pass untouched.
    """

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.interval = interval
        self.clock = clock
        self._seen: dict[str, _Seen] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = _kind(record)
        if kind is None:
            return True
        with self._lock:
            now = self.clock()
            seen = self._seen.get(kind)
            if seen is not None and now - seen.since < self.interval:
                seen.suppressed += 1
                return False
            dropped = seen.suppressed if seen is not None else 0
            self._seen[kind] = _Seen(now)
        text = record.getMessage()
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and str(error) not in text:
            text = f"{text}: {error}"
        if dropped:
            text += f" ({dropped} more like this in the last {self.interval:g} s not logged)"
        record.msg, record.args = text, None
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def _kind(record: logging.LogRecord) -> str | None:
    tagged = getattr(record, _REPEAT, None)
    if isinstance(tagged, str):
        return tagged
    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, OSError) and error.errno in _OUT_OF_FILES:
        return "out of open files"
    message = record.msg if isinstance(record.msg, str) else ""
    if "out of system resource" in message or "Too many open files" in message:
        return "out of open files"
    return None


def install_repeat_filter(interval: float) -> None:
    """Put one ``RepeatFilter`` on the handlers of the root logger and of uvicorn's (which
    do not propagate); call it again after uvicorn configures its logging."""
    shared = RepeatFilter(interval)
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access", "asyncio"):
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, RepeatFilter) for f in handler.filters):
                handler.addFilter(shared)
