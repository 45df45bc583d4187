"""Writes to a tenant happen one at a time, and each one drops the tenant's cached answers.

One at a time so a tenant's writes apply in the order they were accepted: a PUT that
arrives after an upload job is never overtaken by it. Reads never wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from flexmatch.adapters.http.cache import SearchCache


class TenantWriter:
    """A lock per tenant; leaving a write invalidates that tenant's search cache."""

    def __init__(self, cache: SearchCache) -> None:
        self.cache = cache
        self._locks: dict[str, asyncio.Lock] = {}

    @asynccontextmanager
    async def write(self, tenant: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(tenant, asyncio.Lock())
        async with lock:
            try:
                yield
            finally:
                self.cache.invalidate(tenant)
