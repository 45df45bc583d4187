"""The ``flexmatch`` command: a thin layer over ``KnowledgeBase``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from flexmatch.chains.base import registered
from flexmatch.chains.formatters import tool_result
from flexmatch.errors import FlexMatchError
from flexmatch.kb import KnowledgeBase
from flexmatch.loaders import discover
from flexmatch.models import IngestReport, SearchResult

app = typer.Typer(
    help="FlexMatch: a question-indexed knowledge base for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
errors = Console(stderr=True)

KbOption = Annotated[
    Path,
    typer.Option(
        "--kb",
        envvar="FLEXMATCH_KB",
        help="Knowledge-base folder ($FLEXMATCH_KB, else here).",
        file_okay=False,
    ),
]


def _open(kb: Path) -> KnowledgeBase:
    return KnowledgeBase.open(kb)


def _say_notices(kb: KnowledgeBase) -> None:
    for notice in kb.notices:
        errors.print(f"[yellow]note:[/] {escape(notice)}")


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="Folder to create the knowledge base in.")],
    template: Annotated[str, typer.Option(help="Built-in config template.")] = "default",
) -> None:
    """Create a knowledge base: flexmatch.yaml plus chains/ and prompts/ for overrides."""
    path = KnowledgeBase.init(directory, template)
    console.print(f"Created {escape(str(path))}")


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files, folders or .jsonl corpora.")],
    kb: KbOption = Path("."),
    source: Annotated[str | None, typer.Option(help="Source (from flexmatch.yaml).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Load, chunk, enrich, embed and store documents."""
    with _open(kb) as base:
        tasks, _ = discover(paths)
        total = sum(task.count() for task in tasks)
        columns = (
            TextColumn("[bold]ingest"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=errors, transient=True, disable=as_json) as bar:
            task_id = bar.add_task("ingest", total=total, detail="")

            def progress(report: IngestReport) -> None:
                done = report.documents + len(report.failed)
                detail = (
                    f"{report.chunks} chunks · {report.usage.calls} LLM calls"
                    f" · {len(report.failed)} failed"
                )
                bar.update(task_id, completed=done, detail=detail)

            report = base.ingest(paths, source=source, progress=progress)
        if not as_json:
            _say_notices(base)
    if as_json:
        console.print_json(report.model_dump_json())
    else:
        _print_report(report)
    if report.failed and report.documents == 0:
        raise typer.Exit(1)


def _print_report(report: IngestReport) -> None:
    usage = report.usage
    console.print(
        f"Ingested [bold]{report.documents}[/] documents → {report.chunks} chunks, "
        f"{report.matching_texts} matching texts in {report.seconds:.1f}s"
    )
    console.print(
        f"LLM: {usage.calls} calls ({usage.cached_calls} from cache), "
        f"{usage.prompt_tokens + usage.completion_tokens} tokens, ${usage.cost_usd:.4f}"
    )
    for failure in report.failed:
        errors.print(f"[red]failed:[/] {escape(failure.error)}")


@app.command()
def query(
    text: Annotated[str, typer.Argument(help="What to look for.")],
    kb: KbOption = Path("."),
    top_n: Annotated[int | None, typer.Option("--top-n", min=1, max=100)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON tool result.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the agent's facts block.")
    ] = False,
) -> None:
    """Answer a query with the chunks that best match it."""
    with _open(kb) as base:
        results = base.query(text, top_n=top_n)
        if as_json:
            console.print_json(json.dumps(tool_result(text, results), ensure_ascii=False))
        elif markdown:
            console.print(base.format(text, results, formatter="markdown"), markup=False)
        else:
            _say_notices(base)
            _print_results(text, results)


def _print_results(text: str, results: list[SearchResult]) -> None:
    console.print(f"[bold]Query:[/] {escape(text)}")
    if not results:
        console.print("No results: the knowledge base holds nothing that matches.")
    for rank, r in enumerate(results, start=1):
        where = " › ".join(part for part in [r.title, *r.heading_path] if part)
        content = r.content if len(r.content) <= 700 else r.content[:700] + "…"
        body = (
            f"[dim]source:[/] {escape(r.source)}  [dim]uri:[/] {escape(r.uri)}\n"
            f"[dim]matched:[/] {escape(r.matched_text[:300])}\n"
            f"[dim]context:[/] {escape(r.qualifying_text)}\n\n{escape(content)}"
        )
        console.print(
            Panel(body, title=f"{rank}. {escape(where)}  ({r.score:.3f})", title_align="left")
        )


@app.command()
def chains(kb: KbOption = Path(".")) -> None:
    """The chain types available, and the chains each source and the query path use."""
    table = Table(title="Registered chain types")
    table.add_column("kind")
    table.add_column("types")
    for kind, names in registered().items():
        table.add_row(kind, ", ".join(names))
    console.print(table)
    with _open(kb) as base:
        used = Table(title="Chains in use")
        for column in ("where", "kind", "chain", "file"):
            used.add_column(column)
        for name in base.config.sources:
            for chain in base.source_chains(name).all():
                used.add_row(f"source {name}", chain.kind, chain.spec.name, chain.spec.path)
        query_chains = base.query_chains()
        for chain in (query_chains.transform, query_chains.reranker, base.formatter()):
            used.add_row("query", chain.kind, chain.spec.name, chain.spec.path)
        console.print(used)
        _say_notices(base)


def main() -> None:
    """Entry point: user errors are one clear line and exit code 2, never a traceback."""
    try:
        app()
    except FlexMatchError as exc:
        errors.print(f"[red]error:[/] {escape(str(exc))}")
        sys.exit(2)
    except KeyboardInterrupt:
        errors.print("[red]interrupted[/]")
        sys.exit(130)


if __name__ == "__main__":
    main()
