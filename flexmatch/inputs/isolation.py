"""Parsing and fetching in worker processes: a hostile input costs a worker, never the caller.

Every parse (and every web fetch) runs in a separate process with a wall-clock bound
(``ingest.parse_timeout``; a web source's ``timeout``) and an address-space cap
(``ingest.parse_memory_mb``). A worker that runs over is killed and replaced (pebble's
process pool): a pathological file, or a server that trickles one byte a second, is one
clear per-input error, and the caller's event loop, threads and memory are never held by
it. Workers are forked (``fork``: a spawned or fork-server worker would re-run the
caller's main script, and a script without an ``if __name__ == "__main__"`` guard would
run again in every worker); the parser libraries are imported before the first fork, so
a worker never imports, and holds nothing of its parent's but memory: right after the
fork it lets go of the listening sockets and store locks it inherited, and the kernel
kills it when its parent dies (``flexmatch.lifecycle``), so a ``kill -9`` of a server
leaves no worker holding its port or its store.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Literal, TypeVar

from flexmatch.errors import FlexMatchError, ParseError
from flexmatch.lifecycle import die_with_parent, drop_inherited

T = TypeVar("T")
# imported before forking: a worker then never needs the import lock a thread may hold
_PRELOAD = (
    "flexmatch.inputs.parsing",
    "flexmatch.inputs.sources.fetch",
    "flexmatch.inputs.sources.pages",
    "bs4",
    "lxml.html",
    "markdown_it",
    "requests",
    "pdfminer.high_level",
    "pypdf",
    "docx",
    "pptx",
    "openpyxl",
    "odf.opendocument",
    "striprtf.striprtf",
    "PIL.Image",  # OCR (the 'ocr' extra): Tesseract's library, PDFium to render pages
    "tesserocr",
    "pypdfium2",
)


# the memory this process may use for a parse (``ingest.parse_memory_mb``): set in each
# worker as it starts; None: not a worker, no cap of its own
_MEMORY_MB: int | None = None


def memory_cap_mb() -> int | None:
    """The megabytes a parse in this process may use, when it runs in a worker."""
    return _MEMORY_MB


def _forget_stdin() -> None:
    """In a forked child: no ``sys.stdin`` object. multiprocessing's child closes it first
    thing, and that waits for its lock; a thread of the parent blocked reading stdin (an
    MCP stdio server, a program waiting for input while it shares its knowledge base)
    holds that lock, and in the child nobody ever releases it: the worker hung at birth."""
    sys.stdin = None


os.register_at_fork(after_in_child=_forget_stdin)


def _preload() -> None:
    import importlib

    for name in _PRELOAD:
        with contextlib.suppress(ImportError):  # an extra that is not installed
            importlib.import_module(name)


def _address_space() -> int:
    """Bytes of address space this process has mapped (0 where /proc does not tell)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _start_worker(megabytes: int, parent: int) -> None:  # runs in each new worker
    """Tie the worker to its parent, then cap its memory: ``megabytes`` more than it
    starts with. A forked worker starts with its parent's mappings (a server's models,
    thread stacks and allocator arenas: often over a gigabyte), which a parse never
    touches; capped absolutely, a big parent left a parse almost nothing.

    A worker's channel does not tell it that its parent died (its siblings hold copies
    of the pipes, and a busy worker does not read it), so the kernel kills it instead:
    the parent-death signal, armed from a thread that lives as long as the pool
    (``IsolatedPool._keep``), since the signal follows the forking *thread*."""
    import resource

    die_with_parent(parent)
    drop_inherited()

    global _MEMORY_MB
    limit = _address_space() + megabytes * 1024 * 1024
    with contextlib.suppress(ValueError, OSError):  # a platform without it still parses
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        _MEMORY_MB = megabytes  # a parse that runs out names this cap


class IsolatedPool:
    """A small pool of worker processes shared by one knowledge base's ingests."""

    def __init__(
        self,
        *,
        workers: int = 2,
        timeout: float = 60.0,
        memory_mb: int = 2048,
        start: Literal["fork", "forkserver"] = "fork",
    ) -> None:
        """``start``: ``fork`` (fast: the parsers are preloaded here and shared) or
        ``forkserver`` (workers from a fresh process, for a parent whose open connections
        or mapped memory a fork must not inherit, e.g. a Ray worker)."""
        self.workers = workers
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.start = start
        self._pool: Any = None
        self._lock = threading.Lock()
        self._stop_keeper = threading.Event()

    def _ensure(self) -> Any:
        with self._lock:
            if self._pool is None or not self._pool.active:
                import pebble

                context = multiprocessing.get_context(self.start)
                if self.start == "forkserver":
                    context.set_forkserver_preload(list(_PRELOAD))
                else:
                    _preload()
                # a forked worker's parent is this process; a fork server's is the server
                parent = os.getpid() if self.start == "fork" else 0
                pool = pebble.ProcessPool(
                    max_workers=self.workers,
                    initializer=_start_worker,
                    initargs=(self.memory_mb, parent),
                    context=context,
                )
                self._stop_keeper.set()  # a broken pool's keeper
                self._stop_keeper = threading.Event()
                self._keep(pool, self._stop_keeper)
                self._pool = pool
            return self._pool

    @staticmethod
    def _keep(pool: Any, stop: threading.Event) -> None:
        """Start ``pool``'s workers from a thread that stays until the pool is closed.
        pebble forks the first workers in the thread that first schedules (a request's
        short-lived worker thread, say) and their replacements in its own manager
        thread; a worker's parent-death signal fires when its forking thread ends."""
        started: list[BaseException | None] = []
        ready = threading.Event()

        def keeper() -> None:
            try:
                pool.schedule(_nothing).result()
                started.append(None)
            except BaseException as exc:  # handed to the caller below
                started.append(exc)
            ready.set()
            stop.wait()

        threading.Thread(target=keeper, name="flexmatch-workers", daemon=True).start()
        ready.wait()
        if started[0] is not None:
            pool.stop()
            raise started[0]

    def run(
        self,
        function: Callable[..., T],
        *args: Any,
        label: str,
        timeout: float | None = None,
        what: str = "parsing",
        setting: str = "ingest.parse_timeout",
        error: type[FlexMatchError] = ParseError,
    ) -> T:
        """``function(*args)`` in a worker, stopped after ``timeout`` (default: the pool's);
        errors name ``label`` (the file or URL)."""
        from pebble import ProcessExpired

        limit = timeout or self.timeout
        future = self._ensure().schedule(function, args=args, timeout=limit)
        try:
            return future.result()
        except FutureTimeout:
            raise error(
                f"{label}: {what} took longer than {limit:g}s and was stopped ({setting})"
            ) from None
        except ProcessExpired as exc:
            raise error(
                f"{label}: the {what} worker died ({_death(exc.exitcode)}); the input is not "
                f"readable within {self.memory_mb} MB (ingest.parse_memory_mb)"
            ) from None
        except FlexMatchError:
            raise
        except MemoryError:
            raise error(
                f"{label}: {what} needs more than {self.memory_mb} MB (ingest.parse_memory_mb)"
            ) from None
        except Exception as exc:
            raise error(f"{label}: {what} failed: {type(exc).__name__}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.stop()
                self._pool.join(timeout=5)
                self._pool = None
            self._stop_keeper.set()  # after: its end would kill the workers it forked


def _nothing() -> None:
    """The task that starts a pool's workers."""


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"
