"""Deadlines for code FlexMatch does not control: a plug-in's call runs on a thread of its
own, and the caller stops waiting for it at its deadline.

Python cannot stop a thread, so a call past its deadline is abandoned, not killed: its
thread is a daemon (it never holds up the process's exit), a coroutine's task is
cancelled at its next ``await``, and a generator is closed at its next item. What the
caller gets is an ``Overdue`` (a ``TimeoutError``) at the deadline, so one hung plug-in
call fails its own item and the run goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
_POLL = 0.1  # seconds between checks of a stop request by a producer that waits to hand over


class Overdue(TimeoutError):
    """A call that was given up at its deadline (told apart from a ``TimeoutError`` the
    call raised itself)."""


def _daemon(target: Callable[[], None], name: str) -> None:
    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(target,), name=name, daemon=True).start()


async def run_coroutine(
    work: Callable[[], Coroutine[Any, Any, T]], timeout: float, name: str = "flexmatch-deadline"
) -> T:
    """``await work()`` on a daemon thread with a loop of its own, for at most ``timeout``
    seconds (then ``Overdue``; its task is cancelled, its thread left to end). The
    coroutine is made on that thread, so nothing is left un-awaited here."""
    done: Future[T] = Future()
    box: dict[str, Any] = {}

    async def main() -> T:
        box["loop"] = asyncio.get_running_loop()
        box["task"] = asyncio.current_task()
        return await work()

    def target() -> None:
        try:
            result = asyncio.run(main())
        except BaseException as exc:  # handed to the waiting caller, whatever it is
            if not done.done():
                done.set_exception(exc)
        else:
            if not done.done():
                done.set_result(result)

    _daemon(target, name)
    try:
        return await asyncio.wait_for(asyncio.wrap_future(done), timeout)
    except TimeoutError:
        if done.done() and not done.cancelled() and done.exception() is not None:
            raise  # the coroutine's own TimeoutError, not the deadline
        loop, task = box.get("loop"), box.get("task")
        if loop is not None and task is not None:
            loop.call_soon_threadsafe(task.cancel)
        raise Overdue(f"no answer within {timeout:g}s") from None


def iterate(
    produce: Callable[[], Iterable[T]], timeout: float, name: str = "flexmatch-deadline"
) -> Iterator[T]:
    """The items of ``produce()``, made on a daemon thread one ahead of the caller. The
    time the caller spends waiting for them, in all, is at most ``timeout`` seconds (then
    ``Overdue``); the time it spends on each item it was given does not count. An
    error of ``produce`` is raised here. Closing this iterator early (or a timeout) asks
    the producer to stop at its next item."""
    handover: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def give(kind: str, value: Any) -> bool:
        while not stop.is_set():
            try:
                handover.put((kind, value), timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def target() -> None:
        try:
            items = iter(produce())
            try:
                for item in items:
                    if not give("item", item):
                        return
            finally:
                close = getattr(items, "close", None)
                if stop.is_set() and callable(close):
                    close()
        except BaseException as exc:  # handed to the caller, whatever it is
            give("error", exc)
            return
        give("end", None)

    _daemon(target, name)
    left = timeout
    try:
        while True:
            started = time.monotonic()
            try:
                kind, value = handover.get(timeout=max(left, 0.0))
            except queue.Empty:
                raise Overdue(f"no answer within {timeout:g}s") from None
            left -= time.monotonic() - started
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
