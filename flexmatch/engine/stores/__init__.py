"""Vector stores: embedded Qdrant (qdrant-edge) by default, a Qdrant server by URL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from flexmatch.engine.stores.base import Filters, Hit, Search, StoredPoint, VectorStore


def open_store(
    *,
    path: Path,
    url: str | None = None,
    api_key: str | None = None,
    collection: str = "flexmatch",
    lock_timeout: float = 0.0,
    cluster: dict[str, Any] | None = None,
    on_hold: Callable[[bool], None] | None = None,
) -> VectorStore:
    """A Qdrant server when ``url`` is set, else the embedded engine in ``path``;
    ``cluster`` (shards, replicas, on-disk storage) shapes a server collection it creates;
    ``on_hold`` hears when this process takes and lets go of an embedded store."""
    if url:
        from flexmatch.engine.stores.server import ClusterSettings, ServerStore

        return ServerStore(url, api_key, collection, ClusterSettings(**(cluster or {})))
    from flexmatch.engine.stores.edge import EdgeStore

    return EdgeStore(path, lock_timeout, on_hold=on_hold)


__all__ = ["Filters", "Hit", "Search", "StoredPoint", "VectorStore", "open_store"]
