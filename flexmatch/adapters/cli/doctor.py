"""``flexmatch doctor``: check the embedded store, and repair it with ``--fix``.

A separate command, not a step of every open: the check reads every payload in the store,
and the repair rewrites files, so it runs when an operator asks (or when an error says to).
The work is in ``engine.stores.repair``; this only finds the store and prints the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

import flexmatch as fm  # names load on first use
from flexmatch.adapters.cli.output import shown
from flexmatch.adapters.command_line import JsonOption, KbOption, kb_folder

if TYPE_CHECKING:
    from flexmatch import DoctorReport

console = Console()


def doctor(
    kb: KbOption = Path("."),
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Repair: back up the store beside it, make its log readable again and "
            "remove the points that cannot be read. Without it nothing changes.",
        ),
    ] = False,
    backup: Annotated[
        bool, typer.Option("--backup/--no-backup", help="Copy the store before --fix changes it.")
    ] = True,
    as_json: JsonOption = False,
) -> None:
    """Check the store for entries and points it cannot read (exit code 1 when it finds
    any and --fix is not given); --fix repairs it, keeping every readable point."""
    folder = kb_folder(kb)
    settings = fm.load_config(folder).store
    if settings.url:
        raise fm.ConfigError(
            "flexmatch doctor checks the embedded store; this knowledge base uses the Qdrant "
            "server in store.url"
        )
    path = Path(settings.path)
    report = fm.doctor_store(path if path.is_absolute() else folder / path, fix=fix, backup=backup)
    if as_json:
        console.print_json(report.model_dump_json())
    else:
        _print(report)
    if not report.healthy and not report.fixed:
        raise typer.Exit(1)


def _print(report: DoctorReport) -> None:
    checked = "not read yet" if report.points_checked is None else str(report.points_checked)
    console.print(
        f"Store {shown(report.store)}: {report.log_entries} log entries, "
        f"{len(report.log_problems)} unreadable; points checked: {checked}, "
        f"{len(report.bad_points)} to remove"
    )
    for problem in report.log_problems:
        state = "repairable" if problem.repairable else "NOT repairable"
        console.print(
            f"  log entry {problem.index} ({shown(problem.file)}): nested {problem.depth} "
            f"levels deep, {state}{'; ' + shown(problem.reason) if problem.reason else ''}"
        )
    for point in report.bad_points[:50]:
        console.print(
            f"  point {shown(point.id)}: {point.why} (tenant {shown(repr(point.tenant))}, "
            f"document {shown(repr(point.document_id))}, record {shown(repr(point.record))})"
        )
    if len(report.bad_points) > 50:
        console.print(f"  … and {len(report.bad_points) - 50} more (--json lists them all)")
    for note in report.notes:
        console.print(f"[yellow]note:[/] {shown(note)}")
    if report.backup:
        console.print(f"Backed up the store to {shown(report.backup)}")
    if report.fixed:
        repaired = sum(p.repairable for p in report.log_problems)
        console.print(
            f"Repaired {_count(repaired, 'log entry', 'log entries')} and removed "
            f"{_count(report.removed_points, 'point', 'points')}; "
            "the store reads in full. Ingest the documents named above again."
            if report.log_problems or report.bad_points
            else "The store is healthy; nothing to repair."
        )
    elif report.healthy:
        console.print("The store is healthy.")
    else:
        console.print("Run [bold]flexmatch doctor --fix[/] to repair it (it backs the store up).")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def register(app: typer.Typer) -> None:
    app.command()(doctor)
