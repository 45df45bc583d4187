"""``flexmatch eval``: retrieval quality of setups side by side, on a BEIR dataset, or
of an existing knowledge base on golden questions (``--kb KB golden.yaml``, in
``golden``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

import flexmatch as fm  # names load on first use: `flexmatch --help` imports no engine
import flexmatch.service as fm_service
from flexmatch import DEFAULT_TENANT
from flexmatch.adapters.cli.golden import run_golden
from flexmatch.adapters.cli.output import console, errors, shown
from flexmatch.adapters.command_line import AsOption, GroupOption, JsonOption, TenantOption, reader

if TYPE_CHECKING:
    from flexmatch import IngestReport, Scores


def evaluate(
    dataset: Annotated[
        Path | None,
        typer.Argument(
            help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/), or a golden-questions "
            "YAML file judged on the knowledge base --kb names."
        ),
    ] = None,
    setup: Annotated[
        list[str] | None,
        typer.Option("--setup", help="Setup file or built-in name (repeatable); default: default."),
    ] = None,
    baselines: Annotated[
        bool, typer.Option("--baselines", help="Add BM25, dense-passage and RRF baselines.")
    ] = False,
    config: Annotated[
        Path | None, typer.Option("--config", help="Base flexmatch.yaml the setups apply to.")
    ] = None,
    split: Annotated[str, typer.Option(help="qrels split.")] = "test",
    limit: Annotated[int | None, typer.Option(help="Only the first N queries.")] = None,
    save_to: Annotated[
        Path | None,
        typer.Option(
            "--save-to",
            file_okay=False,
            help="Keep the results in this knowledge base (the web console shows the latest).",
        ),
    ] = None,
    as_json: JsonOption = False,
    kb: Annotated[
        Path | None,
        typer.Option(
            "--kb",
            envvar="FLEXMATCH_KB",
            help="Golden questions: the knowledge base judged ($FLEXMATCH_KB, else here).",
        ),
    ] = None,
    at: Annotated[
        int,
        typer.Option(
            "--at", min=1, max=10, help="Golden questions: the rank the answer must reach."
        ),
    ] = 1,
    generate: Annotated[
        int | None,
        typer.Option(
            "--generate",
            min=1,
            help="Golden questions: the LLM writes held-out questions for N sampled chunks.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Which chunks --generate samples.")] = 0,
    write_golden: Annotated[
        Path | None,
        typer.Option("--write-golden", dir_okay=False, help="Keep the generated questions here."),
    ] = None,
    ablation: Annotated[
        bool,
        typer.Option("--ablate", help="Golden questions: switch each signal off in turn."),
    ] = False,
    tenant: TenantOption = DEFAULT_TENANT,
    as_user: AsOption = None,
    groups: GroupOption = None,
) -> None:
    """Measure retrieval quality (nDCG@10, recall@5/10, MRR@10, latency) of setups side by
    side on a BEIR data set, or judge a knowledge base on golden questions (--kb)."""
    import tempfile

    golden = dataset is not None and (dataset.is_file() or dataset.suffix in (".yaml", ".yml"))
    if generate is not None or golden:
        if config is not None or baselines or save_to is not None:
            message = "golden questions run on the knowledge base's own config (--kb)"
            raise typer.BadParameter(message, param_hint="--config/--baselines/--save-to")
        run_golden(
            dataset,
            kb or Path("."),
            setups=list(setup or []),
            generate=generate,
            seed=seed,
            write_golden=write_golden,
            ablation=ablation,
            at=at,
            limit=limit,
            tenant=tenant,
            principal=reader(as_user, groups),
            as_json=as_json,
        )
        return
    if dataset is None:
        message = "give a BEIR folder, or golden questions (a YAML file, or --generate N)"
        raise typer.BadParameter(message, param_hint="DATASET")
    if save_to is not None and not save_to.expanduser().is_dir():  # before the long run
        message = f"{save_to} is not a knowledge-base folder"
        raise typer.BadParameter(message, param_hint="--save-to")
    data = fm.BeirDataset.load(dataset, split)
    base = fm.load_config(config.parent) if config else fm.KBConfig()
    names = list(setup or ["default"]) + (list(fm_service.BASELINES) if baselines else [])
    setups = [fm.load_setup(name, base) for name in dict.fromkeys(names)]
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=errors, transient=True, disable=as_json) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
            bar.update(tasks[name], completed=done, total=total)

        with tempfile.TemporaryDirectory(prefix="flexmatch-eval-") as work:
            results = fm_service.run_sync(
                fm.evaluate_setups(setups, data, Path(work), limit=limit, progress=progress)
            )
    if save_to is not None:
        _save_eval(save_to, dataset, split, results)
    if as_json:
        rows = [
            {"setup": name, **scores.model_dump(), "ingest_seconds": report.seconds}
            for name, (report, scores) in results.items()
        ]
        console.print_json(json.dumps(rows))
        return
    queries = next(iter(results.values()))[1].queries
    table = Table(title=f"{shown(dataset.name)}: {queries} queries")
    for column in ("setup", "nDCG@10", "recall@5", "recall@10", "MRR@10", "median ms", "p95 ms"):
        table.add_column(column, justify="left" if column == "setup" else "right")
    for name, (_, s) in results.items():
        table.add_row(
            shown(name),
            f"{s.ndcg_at_10:.4f}",
            f"{s.recall_at_5:.4f}",
            f"{s.recall_at_10:.4f}",
            f"{s.mrr_at_10:.4f}",
            f"{s.latency_median_ms:.1f}",
            f"{s.latency_p95_ms:.1f}",
        )
    console.print(table)


def _save_eval(
    kb: Path, dataset: Path, split: str, results: dict[str, tuple[IngestReport, Scores]]
) -> None:
    """The run as the knowledge base's latest eval results (what the console shows)."""
    folder = kb.expanduser().resolve()
    rows = [
        fm_service.EvalRow(setup=name, ingest_seconds=report.seconds, **scores.model_dump())
        for name, (report, scores) in results.items()
    ]
    path = fm_service.save_eval(
        folder, fm_service.EvalRun(dataset=dataset.name, split=split, rows=rows)
    )
    errors.print(f"saved to {shown(str(path))}")
