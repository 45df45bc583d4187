"""``flexmatch sync --watch``: sync, then follow the sources' folders and sync again as
they change, until Ctrl-C or SIGTERM.

The work is ``KnowledgeBase.watch``; this prints a line per source synced (what it
added, changed and removed, and which changes caused it; a failed one says when it is
tried again) and per path that goes or comes
back, or each ``WatchEvent`` as a JSON line, and exits 130 when stopped, after saying
what the whole watch stored and spent.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime

import typer
from rich.console import Console

import flexmatch as fm  # names load on first use
from flexmatch.adapters.cli.interrupts import RunWatch, stopped_cleanly
from flexmatch.adapters.cli.output import shown
from flexmatch.adapters.cli.replicas import forget_cached_answers

console = Console(highlight=False, soft_wrap=True)  # a line per event, never wrapped
errors = Console(stderr=True, highlight=False, soft_wrap=True)
# a JSON line leaves out the report's per-document lists (a first sync of a large
# folder would make it megabytes long): the counts, removals and failures stay
LEFT_OUT = {"sync": {"report": {"document_ids", "outcomes", "skipped_files"}}}
SHOWN_PATHS = 3


def follow(base: fm.KnowledgeBase, source: list[str] | None, tenant: str, as_json: bool) -> None:
    """Watch until stopped; a stop prints what the watch did (and exits 130). With no
    source to watch, the first sync is all (exit 2, saying so)."""
    watch = RunWatch(base, tenant)
    with stopped_cleanly(watch, errors, as_json, indent=None):
        watched = False
        for event in base.watch(source=source, tenant=tenant, progress=_seen(watch)):
            watched = watched or event.kind == "watching"
            if event.kind == "synced":
                _finished(watch, event)
                forget_cached_answers(base, tenant, errors)
            if as_json:
                sys.stdout.write(event.model_dump_json(exclude=LEFT_OUT) + "\n")
                sys.stdout.flush()
            else:
                say(event)
    if not watched:
        errors.print("[red]Nothing to watch:[/] no files or records source with paths was chosen.")
        raise typer.Exit(2)


def _seen(watch: RunWatch) -> Callable[[str, fm.IngestReport], None]:
    def seen(name: str, report: fm.IngestReport) -> None:
        watch.seen(report)

    return seen


def _finished(watch: RunWatch, event: fm.WatchEvent) -> None:
    entry = event.sync
    done = entry.report if entry is not None and entry.report is not None else watch.report
    if done is not None:
        watch.finish(done)


def say(event: fm.WatchEvent) -> None:
    """One line for the event (a sync's failures and warnings after it, on stderr)."""
    name = shown(event.source)
    clock = datetime.now().strftime("%H:%M:%S")
    if event.kind == "watching":
        console.print(f"{clock} [bold]{name}[/] watching {_paths(event.paths)} (Ctrl-C stops)")
    elif event.kind == "not_watched":
        errors.print(f"{clock} [yellow]{name} not watched:[/] {shown(event.reason or '')}")
    elif event.kind == "gone":
        errors.print(
            f"{clock} [yellow]{name}:[/] {_paths(event.paths)} {shown(event.reason or '')}"
        )
    elif event.kind == "back":
        console.print(f"{clock} [bold]{name}[/] {_paths(event.paths)} is back, watched again")
    elif event.sync is not None:
        again = _again(event.retry_seconds)
        console.print(
            f"{clock} [bold]{name}[/] {_counts(event.sync)}{_because(event.paths)}{again}"
        )
        _details(event.sync)


def _counts(entry: fm.SourceSync) -> str:
    done = entry.report
    if entry.outcome != "done" or done is None:
        style = "red" if entry.outcome == "failed" else "yellow"
        return f"[{style}]{entry.outcome}:[/] {shown(entry.reason or '')}"
    counts = (
        f"{done.added} added, {done.changed} updated, {len(done.removed)} removed, "
        f"{done.unchanged} unchanged"
    )
    failed = f", [red]{len(done.failed)} failed[/]" if done.failed else ""
    return f"{counts}{failed} ({entry.seconds:.1f}s)"


def _again(retry_seconds: float | None) -> str:
    """A failed sync's changes are kept: say when it is tried again."""
    return "" if retry_seconds is None else f"; tried again in {retry_seconds:.0f}s"


def _because(paths: list[str]) -> str:
    return f" after changes to {_paths(paths)}" if paths else ""


def _paths(paths: list[str]) -> str:
    named = ", ".join(shown(path) for path in paths[:SHOWN_PATHS])
    more = len(paths) - SHOWN_PATHS
    return f"{named} and {more} more" if more > 0 else named


def _details(entry: fm.SourceSync) -> None:
    done = entry.report
    if done is None:
        return
    name = shown(entry.name)
    for warning in done.warnings:
        errors.print(f"[yellow]{name} warning:[/] {shown(warning)}")
    for failure in done.failed:
        errors.print(f"[red]{name} failed:[/] {shown(failure.error)}")
