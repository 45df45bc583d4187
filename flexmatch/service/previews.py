"""Bounded template previews: an edited prompt rendered where it can be stopped.

Any tenant's admin may preview a prompt in the console, so a preview's template is
untrusted input. Within ``bounded_previews()`` every template renders in the sandbox
(which refuses huge values built in one step, ``flexmatch.templates.BoundedSandbox``) in
a worker process that is stopped after ``PREVIEW_SECONDS`` (a nested loop has no call
the sandbox could stop, and a thread cannot be killed), may map ``PREVIEW_MEMORY_MB``
more than it starts with, and stops at ``PREVIEW_MAX_CHARS`` of output.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flexmatch.errors import PromptError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.templates import render_bounded, rendered_by

PREVIEW_SECONDS = 5.0
PREVIEW_MEMORY_MB = 256
PREVIEW_MAX_CHARS = 1_000_000

_workers: IsolatedPool | None = None
_lock = threading.Lock()


def _pool() -> IsolatedPool:
    """The process's preview workers: two (one runaway preview does not queue the
    others), started from a fork server: replacing a stopped worker by forking the server
    itself (often over a gigabyte) held every thread of it, the event loop too, ~0.2 s."""
    global _workers
    with _lock:
        if _workers is None:
            _workers = IsolatedPool(
                workers=2,
                timeout=PREVIEW_SECONDS,
                memory_mb=PREVIEW_MEMORY_MB,
                start="forkserver",
            )
            atexit.register(_workers.close)
        return _workers


def _render(source: str, path: str, context: dict[str, Any]) -> str:
    return _pool().run(
        render_bounded,
        source,
        path,
        context,
        PREVIEW_MAX_CHARS,
        label="the prompt",
        what="preview",
        setting="the console's limit for one preview",
        error=PromptError,
    )


@contextmanager
def bounded_previews() -> Iterator[None]:
    """Within the block, templates render in a preview worker with the limits above.
    Rendering then waits for a process: use it on a thread, never on an event loop."""
    with rendered_by(_render):
        yield
