"""A command's write to a store a service shares (a Qdrant server at ``store.url``).

The replicas of ``flexmatch serve`` cache answers per tenant, keyed on a generation kept
in their shared state; a write through the service bumps it. A write from the command
line (``ingest``, ``sync``, ``docs remove``) bumps it too, so a document it removed or
changed leaves every replica's cached answers at once. The embedded store needs nothing:
no service can hold it while a command writes to it.
"""

from __future__ import annotations

from rich.console import Console

import flexmatch as fm  # names load on first use
import flexmatch.service as fm_service
from flexmatch.adapters.cli.output import shown


def forget_cached_answers(base: fm.KnowledgeBase, tenant: str, errors: Console) -> None:
    """Drop the service's cached answers for ``tenant`` (when the store is a server); a
    state database that cannot be reached is a warning: the write itself is done."""
    if base.config.store.url is None:
        return
    try:
        shared = fm_service.SharedState.for_kb(base.path, base.config)
        try:
            shared.generations.bump(tenant)
        finally:
            shared.close()
    except fm.FlexMatchError as exc:
        errors.print(
            f"[yellow]warning:[/] a running service may answer from its cache until its "
            f"entries expire: {shown(str(exc))}"
        )
