"""Who hears that a tenant's stored knowledge changed, whatever path wrote it.

Every committed write of an open knowledge base (an ingest, sync or re-index run, a
document removed, its access or metadata changed, feedback kept or a learned text
removed) ends by calling ``written(tenant)``, from the engine unit that did it. So an
answer cache kept around the knowledge base (the HTTP service's) is told once, whether
the write came through HTTP, the Python API, MCP, a watch, or another process working
through this one's store (``sharing``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

WriteListener = Callable[[str], None]


class Writes:
    """The listeners of one knowledge base's writes, each called with the tenant."""

    def __init__(self) -> None:
        self._listeners: list[WriteListener] = []
        self._lock = threading.Lock()

    def listen(self, listener: WriteListener) -> Callable[[], None]:
        """Add ``listener``; the function returned removes it again."""
        with self._lock:
            self._listeners.append(listener)

        def forget() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return forget

    def written(self, tenant: str) -> None:
        """Tell every listener; the write is kept whatever they do, but a listener that
        fails (a cache that could not be told) is the caller's error, after the others
        heard: a stale answer served silently would be worse."""
        with self._lock:
            listeners = list(self._listeners)
        failure: Exception | None = None
        for listener in listeners:
            try:
                listener(tenant)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
