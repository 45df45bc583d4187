"""A small LRU cache of search results, per tenant, dropped on any write to the tenant.

Agents repeat queries; a repeated query costs a query rewrite (an LLM call) and an
embedding. Entries expire after a TTL, and every write to a tenant (an ingest job's
document, a replace, a delete) bumps that tenant's generation, so a search that started
before the write can never store a stale answer under the new generation.

The answers stay in this process; the generations live in the service's shared state,
so a write through any replica bumps the counter that every replica's next search reads
(one indexed SELECT per search, before the cache is consulted): an answer cached before
the write can no longer be found anywhere. ``X-Cache: hit|miss`` tells which it was.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Protocol

CacheKey = tuple[Hashable, ...]


class GenerationCounter(Protocol):
    """Where the per-tenant write counters live (``SharedState.generations``)."""

    def current(self, tenant: str) -> int: ...

    def bump(self, tenant: str) -> None: ...


class LocalGenerations:
    """Counters in this process only (a cache no other process writes around)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def current(self, tenant: str) -> int:
        with self._lock:
            return self._counts.get(tenant, 0)

    def bump(self, tenant: str) -> None:
        with self._lock:
            self._counts[tenant] = self._counts.get(tenant, 0) + 1


class SearchCache:
    """Results keyed on (tenant, generation, what was asked), least recently used first out."""

    def __init__(
        self,
        max_entries: int = 1_024,
        ttl_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        generations: GenerationCounter | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.ttl = ttl_seconds
        self.clock = clock
        self.generations = generations or LocalGenerations()
        self._entries: OrderedDict[CacheKey, tuple[float, Any]] = OrderedDict()
        self._seen: dict[str, int] = {}  # the latest generation read, per tenant
        self._lock = threading.Lock()

    def key(self, tenant: str, *parts: Any) -> CacheKey:
        """A key for ``parts`` (JSON-like values) in the tenant's current generation."""
        canonical = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
        if self.max_entries <= 0:
            return (tenant, 0, canonical)  # nothing is cached: no need to ask
        generation = self.generations.current(tenant)
        with self._lock:
            if self._seen.get(tenant, 0) != generation:  # written since: drop the old answers
                self._seen[tenant] = generation
                self._drop(tenant)
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
            if generation != self._seen.get(str(tenant), 0):
                return  # a write happened while this answer was computed
            self._entries[key] = (self.clock(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def invalidate(self, tenant: str) -> None:
        """Forget every answer for ``tenant``, here and (through the shared generation) in
        every other replica; other tenants keep theirs."""
        self.generations.bump(tenant)
        with self._lock:
            self._seen[tenant] = -1  # below any generation: nothing computed before is kept
            self._drop(tenant)

    def clear(self) -> None:
        """Forget every answer of every tenant (a service that stopped hearing writes)."""
        with self._lock:
            self._entries.clear()

    def _drop(self, tenant: str) -> None:
        for key in [k for k in self._entries if k[0] == tenant]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
