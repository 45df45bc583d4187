"""Sync: bring every configured source (or the ones named) up to date in one call.

Each source lists its own items (a files source its ``paths``, a web source its
``urls``, a plug-in what its options name), ingests what is new or changed, and, when
its listing is the whole source, removes what is gone (for files and records, what
was read from under its ``paths``; never under a path that listed nothing). A source
that cannot list itself without inputs is skipped, saying what to set; one that fails
is reported as failed and the next one runs. ``KnowledgeBase.sync`` and
``async_sync`` call this module.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol

from flexmatch.config import CONFIG_FILE, KBConfig, require_source
from flexmatch.errors import FlexMatchError
from flexmatch.models import IngestReport, SourceSync, SyncReport

# what sync reports as it goes: the source being ingested, and its report so far
SyncProgress = Callable[[str, IngestReport], None]


class SourceIngest(Protocol):
    """One whole-source ingest (``KnowledgeBase.aingest`` of one tenant)."""

    def __call__(
        self, *, source: str, prune: bool, progress: Callable[[IngestReport], None]
    ) -> Awaitable[IngestReport]: ...


class Lister(Protocol):
    """What sync asks a source's reader (``SourceReader``) before its run."""

    @property
    def unlisted(self) -> str | None: ...  # why a run without inputs finds nothing

    @property
    def prunable(self) -> bool: ...  # whether that run lists the whole source


def chosen_sources(config: KBConfig, source: str | list[str] | None, where: str) -> list[str]:
    """The sources named (every configured one when none is), in the config's order;
    an unknown name is a ConfigError naming the known ones."""
    if source is None:
        return list(config.sources)
    names = [source] if isinstance(source, str) else list(source)
    for name in names:
        require_source(config.sources, name, f"{where}/{CONFIG_FILE}")
    return [name for name in config.sources if name in names]


async def sync_sources(
    config: KBConfig,
    names: list[str],
    tenant: str,
    *,
    reader: Callable[[str], Lister],
    ingest: SourceIngest,
    progress: SyncProgress | None = None,
) -> SyncReport:
    """Sync ``names`` one after another: ``reader`` says whether a source lists itself
    and whether its listing is whole (prune), ``ingest`` runs its whole-source ingest."""
    report = SyncReport(tenant=tenant)
    for name in names:
        report.sources.append(await _sync_one(config, name, reader, ingest, progress))
    return report


async def _sync_one(
    config: KBConfig,
    name: str,
    reader: Callable[[str], Lister],
    ingest: SourceIngest,
    progress: SyncProgress | None,
) -> SourceSync:
    started = datetime.now(UTC)
    clock = time.perf_counter()
    entry = SourceSync(name=name, type=config.sources[name].type, started=started, outcome="done")

    def tick(ingested: IngestReport) -> None:
        if progress is not None:
            progress(name, ingested)

    try:
        lister = reader(name)
        reason = lister.unlisted
        if reason is not None:
            entry.outcome, entry.reason = "skipped", reason
        else:
            entry.prune = lister.prunable
            entry.report = await ingest(source=name, prune=lister.prunable, progress=tick)
    except FlexMatchError as exc:
        entry.outcome, entry.reason = "failed", str(exc)
    except Exception as exc:  # a plug-in's bug, a disk's error: this source fails, the rest go on
        entry.outcome, entry.reason = "failed", f"{type(exc).__name__}: {exc}"
    entry.seconds = round(time.perf_counter() - clock, 3)
    return entry
