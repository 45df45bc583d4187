"""``flexmatch sync``: bring every configured source (or those named) up to date.

The work is ``KnowledgeBase.sync``; this shows its progress, prints a table with a row
per source (or the ``SyncReport`` as JSON) and exits 0 when every source is done, 2 when
one failed or had failed documents, 130 when stopped (Ctrl-C, SIGTERM) after saying what
was stored, what is pending and what was spent.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import flexmatch as fm  # names load on first use
from flexmatch import DEFAULT_TENANT
from flexmatch.adapters.cli.interrupts import RunWatch, stopped_cleanly
from flexmatch.adapters.cli.output import shown
from flexmatch.adapters.cli.replicas import forget_cached_answers
from flexmatch.adapters.cli.sync_watch import follow
from flexmatch.adapters.command_line import JsonOption, KbOption, TenantOption, kb_folder

if TYPE_CHECKING:
    from flexmatch import IngestReport, SyncReport

console = Console()
errors = Console(stderr=True)
OUTCOME_STYLE = {"done": "green", "failed": "red", "skipped": "yellow"}


def sync(
    kb: KbOption = Path("."),
    source: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME", help="Only this source (from flexmatch.yaml; repeatable)."),
    ] = None,
    tenant: TenantOption = DEFAULT_TENANT,
    as_json: JsonOption = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Then follow the folders of the files and records sources and sync a "
            "source again as its files change (a line per sync; Ctrl-C stops).",
        ),
    ] = False,
) -> None:
    """Bring every source up to date: list it, ingest what is new or changed, remove what
    is gone (files and records sources with paths, web sources with urls)."""
    with fm.KnowledgeBase.open(kb_folder(kb)) as base:
        if watch:
            follow(base, source or None, tenant, as_json)
            return
        report = run(base, source or None, tenant, as_json)
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        print_report(report)
    if not report.ok:  # each failure was named on its own line; the rest is stored
        raise typer.Exit(2)


def run(base: fm.KnowledgeBase, source: list[str] | None, tenant: str, as_json: bool) -> SyncReport:
    """One sync with a progress bar (none with ``as_json``); a stop prints what it did."""
    columns = (
        TextColumn("[bold]sync {task.fields[source]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
    )
    watch = RunWatch(base, tenant)
    current: list[str] = []
    with Progress(*columns, console=errors, transient=True, disable=as_json) as bar:
        task_id = bar.add_task("sync", total=None, source="", detail="")

        def progress(name: str, report: IngestReport) -> None:
            if current and current[-1] != name and watch.report is not None:
                watch.finish(watch.report)  # the previous source is done
            current[:] = [name]
            watch.seen(report)
            detail = f"{report.usage.calls} LLM calls · {len(report.failed)} failed"
            bar.update(
                task_id,
                total=report.planned,
                completed=report.processed,
                source=name,
                detail=detail,
            )

        try:
            with stopped_cleanly(watch, errors, as_json):
                return base.sync(source=source, tenant=tenant, progress=progress)
        finally:
            forget_cached_answers(base, tenant, errors)


def print_report(report: SyncReport) -> None:
    """A row per source, then what each could not do (warnings, failures, removals)."""
    table = Table(
        title=f"sync (tenant {shown(report.tenant)})",
        title_justify="left",
        box=None,
        padding=(0, 1, 0, 0),
    )
    for column in ("source", "type", "outcome"):
        table.add_column(column, no_wrap=True)
    for column in ("new", "changed", "unchanged", "removed", "failed", "LLM $", "s"):
        table.add_column(column, justify="right", no_wrap=True)
    for entry in report.sources:
        cells = [""] * 6
        if entry.report is not None:
            done = entry.report
            counts = (done.added, done.changed, done.unchanged, len(done.removed))
            cells = [*map(str, (*counts, len(done.failed))), f"{done.usage.cost_usd:.4f}"]
        table.add_row(
            shown(entry.name),
            shown(entry.type),
            f"[{OUTCOME_STYLE[entry.outcome]}]{entry.outcome}[/]",
            *cells,
            f"{entry.seconds:.1f}",
        )
    console.print(table)
    total = report.total
    usage = total.usage
    console.print(
        f"Embedded {total.texts_embedded} matching texts ({total.texts_reused} kept their "
        f"stored vectors); LLM: {usage.calls} calls ({usage.cached_calls} from cache), "
        f"{usage.prompt_tokens + usage.completion_tokens} tokens, ${usage.cost_usd:.4f}"
    )
    for entry in report.sources:
        say_details(entry)


def say_details(entry: fm.SourceSync) -> None:
    name = shown(entry.name)
    if entry.reason is not None:
        style = OUTCOME_STYLE[entry.outcome]
        errors.print(f"[{style}]{name} {entry.outcome}:[/] {shown(entry.reason)}")
    done = entry.report
    if done is None:
        return
    for uri in done.removed:
        console.print(f"[yellow]{name} removed:[/] {shown(uri)}")
    for warning in done.warnings:
        errors.print(f"[yellow]{name} warning:[/] {shown(warning)}")
    for failure in done.failed:
        errors.print(f"[red]{name} failed:[/] {shown(failure.error)}")


def register(app: typer.Typer) -> None:
    app.command()(sync)
