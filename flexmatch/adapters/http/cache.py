"""A small LRU cache of search results, per tenant, dropped on any write to the tenant.

Agents repeat queries; a repeated query costs a query rewrite (an LLM call) and an
embedding. Entries expire after a TTL, and every write to a tenant (an ingest job's
document, a replace, a delete) bumps that tenant's generation, so a search that started
before the write can never store a stale answer under the new generation.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

CacheKey = tuple[Hashable, ...]


class SearchCache:
    """Results keyed on (tenant, generation, what was asked), least recently used first out."""

    def __init__(
        self,
        max_entries: int = 1_024,
        ttl_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.ttl = ttl_seconds
        self.clock = clock
        self._entries: OrderedDict[CacheKey, tuple[float, Any]] = OrderedDict()
        self._generations: dict[str, int] = {}
        self._lock = threading.Lock()

    def key(self, tenant: str, *parts: Any) -> CacheKey:
        """A key for ``parts`` (JSON-like values) in the tenant's current generation."""
        with self._lock:
            generation = self._generations.get(tenant, 0)
        canonical = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
        return (tenant, generation, canonical)

    def get(self, key: CacheKey) -> Any | None:
        if self.max_entries <= 0:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            stored_at, value = entry
            if self.clock() - stored_at > self.ttl:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: CacheKey, value: Any) -> None:
        if self.max_entries <= 0:
            return
        tenant, generation = key[0], key[1]
        with self._lock:
            if generation != self._generations.get(str(tenant), 0):
                return  # a write happened while this answer was computed
            self._entries[key] = (self.clock(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def invalidate(self, tenant: str) -> None:
        """Forget every answer for ``tenant``; other tenants keep theirs."""
        with self._lock:
            self._generations[tenant] = self._generations.get(tenant, 0) + 1
            for key in [k for k in self._entries if k[0] == tenant]:
                del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
