"""Watch: keep the sources in sync as their folders change (``KnowledgeBase.watch``).

The files and records sources with ``paths`` are followed through the operating system's
file events (``watchfiles``: inotify on Linux, FSEvents on macOS, no polling); a burst of
changes is gathered until the folders are quiet for a moment (debounced) and syncs just
the sources it touched, and changes made during a sync are gathered meanwhile and sync
once more after it. Only changes a sync would read count: hidden files and folders
(``.flexmatch/``, ``.git/``, an editor's ``.swp``), an editor's scratch files and files
outside the source's ``include``/``exclude`` globs are passed over. Other sources (web, git,
plug-ins) are synced once at the start and not watched. A path that is missing, goes
away or cannot be read is reported once, the rest is still watched, and it is watched
again when it is back. A sync that fails (the store locked by another process past its
``lock_timeout``, an embedding service down, any error at all) does not end the watch:
its changes are kept and it is tried again after a pause that doubles each time it fails
again, up to ``RETRY_MAX_MS``.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flexmatch.config import KBConfig
from flexmatch.errors import FlexMatchError
from flexmatch.inputs.sources.files import resolved_paths, selected
from flexmatch.models import SourceSync, SyncReport, WatchEvent, WatchEventKind

WATCHED_TYPES = ("files", "records")
# editors' scratch files that live for a moment while a file is saved (vim's ``4913``
# probe, JetBrains' ``x___jb_tmp___``); the others are hidden (``.x.swp``, ``.#x``)
EDITOR_FILE = re.compile(r"^4913$|___jb_(tmp|old)___$")
QUIET_MS = 300  # a burst ends when the folders are this quiet...
DEBOUNCE_MS = 1_600  # ...or has gone on this long
CHECK_MS = 1_000  # how often missing paths (and syncs due again) are looked for
RETRY_MS = 2_000  # a failed sync is tried again after this long...
RETRY_MAX_MS = 60_000  # ...doubled each time it fails again, up to this


class WatchedSource:
    """A files or records source's ``paths``, and which changes under them it reads."""

    def __init__(self, name: str, roots: list[Path], include: list[str], exclude: list[str]):
        self.name = name
        self.roots = roots
        self.include = include
        self.exclude = exclude

    def reads(self, path: Path) -> bool:
        """Whether a sync of this source reads ``path`` (or read it, before it went)."""
        for root in self.roots:
            if path == root:
                return True
            if not path.is_relative_to(root):
                continue
            relative = path.relative_to(root)
            if any(part.startswith(".") for part in relative.parts):
                return False  # a folder walk skips hidden files and folders
            if EDITOR_FILE.search(relative.name):
                return False
            # a folder, or what may have been one (gone, with no suffix): any file in it
            folder = path.is_dir() or (not path.suffix and not path.exists())
            return selected(relative, [] if folder else self.include, self.exclude)
        return False


class WatchPlan:
    """Which of the chosen sources are watched, over which paths, and why the others
    are not; ``ignored`` are the knowledge base's own folders (its state, its store)."""

    def __init__(self, config: KBConfig, kb_dir: Path, names: list[str], ignored: list[Path]):
        self.names = names
        self.ignored = ignored
        self.watched: list[WatchedSource] = []
        self.not_watched: dict[str, str] = {}
        self.types = {name: config.sources[name].type for name in names}
        for name in names:
            source = config.sources[name]
            if source.type not in WATCHED_TYPES:
                self.not_watched[name] = (
                    f"a {source.type} source is not watched (only files and records sources "
                    "with paths are): synced at the start only"
                )
            elif not source.paths:
                self.not_watched[name] = f"no folders to watch: set sources.{name}.paths"
            else:
                roots = resolved_paths(kb_dir, source.paths)
                self.watched.append(WatchedSource(name, roots, source.include, source.exclude))

    @property
    def roots(self) -> list[Path]:
        """Every watched path once, in the config's order."""
        return list(dict.fromkeys(root for source in self.watched for root in source.roots))

    def readers(self, path: Path) -> list[str]:
        """The sources that read ``path``."""
        if any(path == folder or path.is_relative_to(folder) for folder in self.ignored):
            return []
        return [source.name for source in self.watched if source.reads(path)]

    def owners(self, root: Path) -> list[str]:
        return [source.name for source in self.watched if root in source.roots]

    def accepts(self, change: Any, path: str) -> bool:
        """The ``watchfiles`` filter: a change some source reads."""
        return bool(self.readers(Path(path)))


def unwatchable(root: Path) -> str | None:
    """Why ``root`` cannot be watched now, or None."""
    if not root.exists():
        return "not found; watched again when it is back"
    wanted = os.R_OK | (os.X_OK if root.is_dir() else 0)
    if not os.access(root, wanted):
        return "not readable; watched again when it is"
    return None


def follow(
    plan: WatchPlan,
    sync: Callable[[str], SyncReport],
    stop: threading.Event,
) -> Iterator[WatchEvent]:
    """Sync every chosen source, then each one again when its paths change, until
    ``stop`` is set (at once when no source is watched); ``sync`` syncs one source. The
    watcher starts before the first sync, so what changes during it is synced after it."""
    for name, reason in plan.not_watched.items():
        yield WatchEvent(kind="not_watched", source=name, reason=reason)
    pending: dict[str, set[str]] = {name: set() for name in plan.names}
    retries: dict[str, _Retry] = {}
    watched = _present(plan)
    first = True
    while not stop.is_set():
        for changes in _changes(plan, watched, stop):
            now = _present(plan)
            yield from _changed_roots(plan, watched, now, pending, first=first)
            for _, path in changes:
                for name in plan.readers(Path(path)):
                    pending.setdefault(name, set()).add(path)
            for name, retry in retries.items():
                if name in pending or retry.due <= time.monotonic():
                    pending.setdefault(name, set()).update(retry.paths)
            for name in [name for name in plan.names if name in pending]:
                changed = sorted(pending.pop(name))
                entries = _synced(plan, sync, name)
                retry_seconds = None
                if any(entry.outcome == "failed" for entry in entries):
                    retry = retries[name] = _Retry.after(retries.get(name), changed)
                    retry_seconds = retry.seconds
                else:
                    retries.pop(name, None)
                for entry in entries:
                    yield WatchEvent(
                        kind="synced",
                        source=name,
                        paths=changed,
                        sync=entry,
                        retry_seconds=retry_seconds,
                    )
            if first:
                first = False
                for source in plan.watched:
                    paths = [str(root) for root in source.roots if root in now]
                    yield WatchEvent(kind="watching", source=source.name, paths=paths)
                if not plan.watched:
                    return  # nothing to follow: the sync was all
            if any(watched.get(root) != place for root, place in now.items()):
                # a path came back, or was replaced (a file saved by renaming another
                # over it): watch it from a new watcher, and sync what changed until then
                for source in plan.watched:
                    pending.setdefault(source.name, set())
                watched = now
                break
            watched = now  # a path that went is left out by the watcher itself


class _Retry:
    """A failed sync's changes, kept until it is tried again at ``due`` (monotonic)."""

    def __init__(self, paths: list[str], seconds: float):
        self.paths = set(paths)
        self.seconds = seconds
        self.due = time.monotonic() + seconds

    @classmethod
    def after(cls, failed: _Retry | None, paths: list[str]) -> _Retry:
        """The next try: ``RETRY_MS`` after a first failure, each pause then twice the last."""
        pause = RETRY_MS / 1000 if failed is None else failed.seconds * 2
        return cls(paths, min(pause, RETRY_MAX_MS / 1000))


def _synced(plan: WatchPlan, sync: Callable[[str], SyncReport], name: str) -> list[SourceSync]:
    """Sync ``name``; an error no sync catches (a plug-in's, a bug) is a failed sync
    reported in one line, not the end of the watch."""
    started = datetime.now(UTC)
    clock = time.perf_counter()
    try:
        return sync(name).sources
    except Exception as exc:  # the watch goes on, whatever a sync raised
        return [
            SourceSync(
                name=name,
                type=plan.types[name],
                started=started,
                seconds=round(time.perf_counter() - clock, 3),
                outcome="failed",
                reason=str(exc)
                if isinstance(exc, FlexMatchError)
                else f"{type(exc).__name__}: {exc}",
            )
        ]


def _present(plan: WatchPlan) -> dict[Path, tuple[int, int]]:
    """The watched paths there now, each with what it is (device, inode)."""
    found: dict[Path, tuple[int, int]] = {}
    for root in plan.roots:
        if unwatchable(root) is None:
            with contextlib.suppress(OSError):  # gone since
                status = root.stat()
                found[root] = (status.st_dev, status.st_ino)
    return found


def _changed_roots(
    plan: WatchPlan,
    before: dict[Path, tuple[int, int]],
    now: dict[Path, tuple[int, int]],
    pending: dict[str, set[str]],
    *,
    first: bool,
) -> Iterator[WatchEvent]:
    """Say which paths went and which came back (their sources then sync), once each."""
    for root in plan.roots:
        kind: WatchEventKind
        if root in now and root not in before and not first:
            kind = "back"
        elif root not in now and (root in before or first):
            kind = "gone"
        else:
            continue
        reason = unwatchable(root)
        for name in plan.owners(root):
            if not first:
                pending.setdefault(name, set()).add(str(root))
            yield WatchEvent(kind=kind, source=name, paths=[str(root)], reason=reason)


def _changes(plan: WatchPlan, roots: Collection[Path], stop: threading.Event) -> Iterable[set[Any]]:
    """Batches of changes under ``roots``, and an empty one every ``CHECK_MS`` (and at
    once when there is nothing to watch)."""
    if not roots:
        yield set()
        while not stop.wait(CHECK_MS / 1000):
            yield set()
        return
    import watchfiles  # a dependency; loaded by the watch only

    batches = watchfiles.watch(
        *sorted(roots),
        watch_filter=plan.accepts,
        debounce=DEBOUNCE_MS,
        step=QUIET_MS,
        stop_event=stop,
        rust_timeout=CHECK_MS,
        yield_on_timeout=True,
        ignore_permission_denied=True,
    )
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except OSError as exc:  # the system's limit on watches, say
            shown = ", ".join(str(root) for root in sorted(roots))
            raise FlexMatchError(f"cannot watch {shown}: {exc}") from exc
        yield batch
