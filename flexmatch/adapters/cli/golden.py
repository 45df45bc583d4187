"""``flexmatch eval --kb KB golden.yaml``: golden questions against an existing knowledge
base: a table per question, a summary per setup, the ablation; exit 1 when a required
question fails, for CI."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table

import flexmatch as fm  # names load on first use: `flexmatch --help` imports no engine
from flexmatch.adapters.cli.output import console, errors, open_kb, shown

if TYPE_CHECKING:
    from flexmatch import GoldenEvaluation, GoldenQuestion, Principal


def run_golden(
    golden: Path | None,
    kb: Path,
    *,
    setups: list[str],
    generate: int | None,
    seed: int,
    write_golden: Path | None,
    ablation: bool,
    at: int,
    limit: int | None,
    tenant: str,
    principal: Principal | None,
    as_json: bool,
) -> None:
    """Load (and/or generate) the golden set, run it, print it, exit 1 on a failure."""
    items: list[GoldenQuestion] = fm.load_golden(golden) if golden is not None else []
    with open_kb(kb) as base:
        if generate is not None:
            made = base.run_sync(
                fm.generate_golden(base, generate, seed=seed, tenant=tenant, principal=principal)
            )
            if write_golden is not None:
                fm.save_golden(made, write_golden)
                errors.print(f"{len(made)} generated questions written to {shown(write_golden)}")
            items += made
        items = items[:limit]
        chosen = [fm.load_setup(name, base.config) for name in dict.fromkeys(setups)]
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, console=errors, transient=True, disable=as_json) as bar:
            tasks: dict[str, TaskID] = {}

            def progress(name: str, done: int, total: int) -> None:
                if name not in tasks:
                    tasks[name] = bar.add_task(name, total=total)
                bar.update(tasks[name], completed=done, total=total)

            with tempfile.TemporaryDirectory(prefix="flexmatch-golden-") as work:
                result = base.run_sync(
                    fm.evaluate_golden(
                        base,
                        items,
                        Path(work),
                        setups=chosen,
                        ablation=ablation,
                        at=at,
                        tenant=tenant,
                        principal=principal,
                        progress=progress,
                    )
                )
    if as_json:
        console.print_json(json.dumps({**result.model_dump(), "failed": result.failed}))
    else:
        _print(result)
    if result.failed:
        raise typer.Exit(1)


def _rank(rank: int | None) -> str:
    return "—" if rank is None else str(rank)


def _print(result: GoldenEvaluation) -> None:
    current = result.runs[0]
    table = Table(
        title=f"Golden questions ({current.setup}; pass: expected within the first {result.at})"
    )
    for column in ("", "question", "expected", "rank", "first result"):
        table.add_column(column, justify="right" if column == "rank" else "left")
    for o in current.outcomes:
        if o.passed:
            mark = "[green]pass[/]"
        else:
            mark = "[yellow]fail (optional)[/]" if o.optional else "[red]FAIL[/]"
        first = shown(o.first or "no result")
        if o.shown_must_not:
            first += f"\n[red]shown, must not be:[/] {shown(', '.join(o.shown_must_not))}"
        table.add_row(mark, shown(o.question), shown(o.expect), _rank(o.rank), first)
    console.print(table)
    summary = Table(title="Summary")
    for column in ("setup", "questions", "passed", "hit@1", "hit@5", "MRR@10", "nDCG@10", "note"):
        summary.add_column(column, justify="left" if column in ("setup", "note") else "right")
    for run in result.runs:
        s = run.scores
        summary.add_row(
            shown(run.setup),
            str(s.questions),
            str(s.passed),
            f"{s.hit_at_1:.3f}",
            f"{s.hit_at_5:.3f}",
            f"{s.mrr_at_10:.3f}",
            f"{s.ndcg_at_10:.3f}",
            shown(run.note),
        )
    console.print(summary)
    if result.ablation:
        ablation = Table(title="Each signal switched off (drop from the current setup)")
        for column in ("signal off", "nDCG@10", "nDCG drop", "MRR drop", "hit@1 drop", "how"):
            ablation.add_column(
                column, justify="left" if column in ("signal off", "how") else "right"
            )
        for row in result.ablation:
            if row.scores is None:
                ablation.add_row(shown(row.signal), "—", "—", "—", "—", shown(row.note))
                continue
            ablation.add_row(
                shown(row.signal),
                f"{row.scores.ndcg_at_10:.3f}",
                f"{row.ndcg_drop:+.3f}",
                f"{row.mrr_drop:+.3f}",
                f"{row.hit_at_1_drop:+.3f}",
                shown(row.how),
            )
        console.print(ablation)
    failed = result.failed
    if failed:
        errors.print(f"[red]{failed} golden question{'s' if failed > 1 else ''} failed[/]")
