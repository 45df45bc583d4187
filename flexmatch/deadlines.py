"""Deadlines for code FlexMatch does not control: a plug-in's call runs on a thread of its
own, and the caller stops waiting for it at its deadline.

Python cannot stop a thread, so a call past its deadline is abandoned, not killed: its
thread is a daemon (it never holds up the process's exit), a coroutine's task is
cancelled at its next ``await``, and a generator is closed at its next item. The caller
learns that the deadline passed as a value (``finished`` False, ``Bounded.overdue``),
never as an exception a plug-in could have raised itself, so one hung plug-in call fails
its own item and the run goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_POLL = 0.1  # seconds between checks of a stop request by a producer that waits to hand over


def _daemon(target: Callable[[], None], name: str) -> None:
    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(target,), name=name, daemon=True).start()


async def within(awaitable: Awaitable[T], timeout: float) -> tuple[bool, T | None]:
    """``(True, result)`` when ``awaitable`` is done within ``timeout`` seconds (its own
    errors raised here, a ``TimeoutError`` of its own included); ``(False, None)`` when
    the deadline passed first (it is cancelled)."""
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.cancel()
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # never unread
        return False, None
    return True, task.result()


async def run_coroutine(
    work: Callable[[], Coroutine[Any, Any, T]], timeout: float, name: str = "flexmatch-deadline"
) -> tuple[bool, T | None]:
    """``await work()`` on a daemon thread with a loop of its own, for at most ``timeout``
    seconds, as ``within`` answers (past the deadline its task is cancelled, its thread
    left to end). The coroutine is made on that thread, so nothing is left un-awaited."""
    done: Future[T] = Future()
    box: dict[str, Any] = {}

    async def main() -> T:
        box["loop"] = asyncio.get_running_loop()
        box["task"] = asyncio.current_task()
        return await work()

    def target() -> None:
        try:
            # not async_bridge.run_sync: a daemon thread abandoned at its deadline keeps
            # no per-thread loop, and its loop and task are handed out to be cancelled
            result = asyncio.run(main())
        except BaseException as exc:  # handed to the waiting caller, whatever it is
            if not done.done():
                done.set_exception(exc)
        else:
            if not done.done():
                done.set_result(result)

    _daemon(target, name)
    waited: asyncio.Future[T] = asyncio.wrap_future(done)
    finished, result = await within(waited, timeout)
    if not finished:
        loop, task = box.get("loop"), box.get("task")
        if loop is not None and task is not None:
            loop.call_soon_threadsafe(task.cancel)
    return finished, result


class Bounded(Generic[T]):
    """The items of ``produce()``, made on a daemon thread one ahead of the caller. The
    time the caller spends waiting for them, in all, is at most ``timeout`` seconds: then
    the iteration ends and ``overdue`` is True. The time it spends on each item it was
    given does not count. An error of ``produce`` is raised here. Closing it early (or
    the deadline) asks the producer to stop at its next item."""

    def __init__(
        self, produce: Callable[[], Iterable[T]], timeout: float, name: str = "flexmatch-deadline"
    ) -> None:
        self.timeout = timeout
        self.overdue = False
        self._left = timeout
        self._handover: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._ended = False
        self._produce = produce
        _daemon(self._run, name)

    def _give(self, kind: str, value: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._handover.put((kind, value), timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            items = iter(self._produce())
            try:
                for item in items:
                    if not self._give("item", item):
                        return
            finally:
                close = getattr(items, "close", None)
                if self._stop.is_set() and callable(close):
                    close()
        except BaseException as exc:  # handed to the caller, whatever it is
            self._give("error", exc)
            return
        self._give("end", None)

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._ended:
            raise StopIteration
        started = time.monotonic()
        try:
            kind, value = self._handover.get(timeout=max(self._left, 0.0))
        except queue.Empty:
            self.overdue = True
            self.close()
            raise StopIteration from None
        self._left -= time.monotonic() - started
        if kind == "item":
            return value
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self) -> None:
        """Stop waiting; the producer stops at its next item."""
        self._ended = True
        self._stop.set()
