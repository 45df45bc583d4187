"""Running async code from synchronous code: the one bridge.

The facade's sync twins (``KnowledgeBase.ingest``, ``search``, ...) and async twins
(``alist_documents``, ``astats``, ...), the CLI, the console's
chain drafts, evaluation and the ingest threads all call ``run_sync``; code that needs
something else (a deadline on a daemon thread: ``deadlines.run_coroutine``) says why.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

_runners = threading.local()


def _thread_runner() -> asyncio.Runner:
    """This thread's event loop, kept between calls: a loop and its thread pool made anew
    for each call cost a few milliseconds, a fair share of a query."""
    runner: asyncio.Runner | None = getattr(_runners, "runner", None)
    if runner is None:
        runner = _runners.runner = asyncio.Runner()
        atexit.register(runner.close)
    return runner


class _Boxed(Generic[T]):
    """A result whose ``repr`` costs nothing. On the main thread, ``asyncio.Runner``
    checks its Ctrl-C handler with ``signal.getsignal``, which formats the handler, and
    with it the finished task and its result: for a list of search results that took
    ~2 ms of every query."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<result>"


async def _boxed(awaitable: Coroutine[Any, Any, T]) -> _Boxed[T]:
    return _Boxed(await awaitable)


def run_sync(awaitable: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to the end from synchronous code, inside a running loop or not.
    Like ``asyncio.run``, nothing it started outlives it: leftover tasks are cancelled."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        runner = _thread_runner()
        try:
            return runner.run(_boxed(awaitable)).value
        finally:
            leftovers = [t for t in asyncio.all_tasks(runner.get_loop()) if not t.done()]
            for task in leftovers:
                task.cancel()
            if leftovers:
                gathered = asyncio.gather(*leftovers, return_exceptions=True)
                runner.get_loop().run_until_complete(gathered)
    # inside a running loop: a thread of its own, with a fresh loop that ends with the call
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, awaitable).result()


def sync_twin(method: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The synchronous twin of an async method (``aingest`` → ``ingest``): the very same
    parameters, for type checkers (``ParamSpec``) and ``inspect.signature`` alike, so a
    twin never drifts from its method, and its docstring; it runs the method to its end
    with ``run_sync``."""

    @functools.wraps(method)
    def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(method(*args, **kwargs))

    name = method.__name__.removeprefix("async_").removeprefix("a")
    twin.__name__ = name
    twin.__qualname__ = method.__qualname__.rsplit(".", 1)[0] + "." + name
    twin.__doc__ = method.__doc__  # one text for both: ``help(kb.ingest)`` says it all
    return twin


def async_twin(method: Callable[P, T]) -> Callable[P, Coroutine[Any, Any, T]]:
    """The async twin of a blocking method (``list_documents`` → ``alist_documents``):
    the very same parameters and docstring, as ``sync_twin``; it runs the method on a
    worker thread (``asyncio.to_thread``), so the event loop is not held while the store
    answers."""

    @functools.wraps(method)
    async def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(method, *args, **kwargs)

    name = "a" + method.__name__
    twin.__name__ = name
    twin.__qualname__ = method.__qualname__.rsplit(".", 1)[0] + "." + name
    twin.__doc__ = method.__doc__
    return twin
