"""A tenant's writes apply one at a time, in the order they were accepted (the knowledge
base tells the search cache of each, ``KnowledgeBase.on_write``).

A write takes a ticket when its request is accepted, reads its input (parses the upload,
fetches the page) whenever it likes, and applies when every earlier ticket of the tenant
is done. So a PUT that arrives after an upload job is never overtaken by it, yet a slow
web server (bounded by its deadline) or a large file delays only the writes queued behind
it, never another tenant's, and never a read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Ticket:
    """A place in a tenant's write order."""

    def __init__(self, tenant: str, previous: Ticket | None) -> None:
        self.tenant = tenant
        self._previous = previous
        self._done = asyncio.Event()
        self._waiter: asyncio.Task[None] | None = None

    async def turn(self) -> None:
        """Wait until every earlier write of the tenant is done."""
        if self._previous is not None:
            await self._previous._done.wait()
            self._previous = None  # let the chain behind us be collected

    def release(self) -> None:
        self._done.set()

    def abandon(self) -> None:
        """Give this place up unused: the writes behind it go on once those before it are
        done (never earlier, or they could overtake them)."""
        previous = self._previous
        if previous is None or previous._done.is_set():
            self.release()
            return

        async def after_previous() -> None:
            await previous._done.wait()
            self.release()

        self._waiter = asyncio.get_running_loop().create_task(after_previous())


class TenantWriter:
    """Tickets per tenant."""

    def __init__(self) -> None:
        self._last: dict[str, Ticket] = {}

    def ticket(self, tenant: str) -> Ticket:
        """Take the next place in ``tenant``'s write order (at acceptance time)."""
        ticket = Ticket(tenant, self._last.get(tenant))
        self._last[tenant] = ticket
        return ticket

    @asynccontextmanager
    async def apply(self, ticket: Ticket) -> AsyncIterator[None]:
        """Run a write in its turn; the ticket is released however the write ends."""
        try:
            await ticket.turn()
            yield
        finally:
            ticket.release()
            if self._last.get(ticket.tenant) is ticket:
                del self._last[ticket.tenant]

    @asynccontextmanager
    async def write(self, tenant: str) -> AsyncIterator[None]:
        """A write with nothing to read first: a ticket taken and applied at once."""
        async with self.apply(self.ticket(tenant)):
            yield
