"""Vector stores: embedded Qdrant (qdrant-edge) by default, a Qdrant server by URL."""

from __future__ import annotations

from pathlib import Path

from flexmatch.config import StoreConfig
from flexmatch.stores.base import Filters, Hit, StoredPoint, VectorStore


def open_store(config: StoreConfig, kb_dir: Path) -> VectorStore:
    """The store the config names: a server when ``url`` is set, else edge in ``path``."""
    if config.url:
        from flexmatch.stores.server import ServerStore

        return ServerStore(config.url, config.api_key, config.collection)
    from flexmatch.stores.edge import EdgeStore

    path = Path(config.path)
    return EdgeStore(path if path.is_absolute() else kb_dir / path, config.lock_timeout)


__all__ = ["Filters", "Hit", "StoredPoint", "VectorStore", "open_store"]
