"""The threads an ingest computes on (chunking, chains without an LLM, building and writing
points): its own few, not asyncio's default pool, which a server's requests use (a search
embeds its query there) and which a big upload's work would otherwise fill."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from flexmatch.async_bridge import run_sync
from flexmatch.engine.embedders import run_in_background

T = TypeVar("T")
_INGEST_THREADS = ThreadPoolExecutor(
    max_workers=2, thread_name_prefix="flexmatch-ingest", initializer=run_in_background
)


async def in_ingest_thread(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on an ingest thread (in the caller's context, as to_thread)."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, function, *args)
    return await asyncio.get_running_loop().run_in_executor(_INGEST_THREADS, call)


async def off_loop(work: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that only computes (a chunker, a chain without an LLM) on an ingest
    thread with a loop of its own: on a server's event loop, a big document's chunking or
    sentence splitting would hold up every other request until it was done."""
    return await in_ingest_thread(run_sync, work)
