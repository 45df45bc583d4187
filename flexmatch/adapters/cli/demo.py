"""``flexmatch demo``: the main job end to end on the sample corpus the package ships.

A new user's first command after ``pip install``: it needs no files, no API key and no
network (the embedded store, the packaged embedding model, the no-LLM chains), so it
shows what FlexMatch does before anything has to be configured. The corpus is
``flexmatch/samples/`` (a fictional harbour town's handbook, ferry timetable, mooring
fees, notices to mariners and an e-mail: Markdown, HTML, text, JSON Lines and .eml),
read from the installed package, so it works from a wheel as from a checkout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlparse

import typer
from rich.console import Console

import flexmatch as fm  # names load on first use
from flexmatch.adapters.cli.output import shown
from flexmatch.adapters.command_line import JsonOption

if TYPE_CHECKING:
    from flexmatch import IngestReport, ResultItem

console = Console()
errors = Console(stderr=True)


@dataclass(frozen=True)
class Example:
    """A question the sample corpus answers, and the document that answers it (a file
    name, or the id of a JSON Lines record)."""

    question: str
    answer_in: str


EXAMPLES: tuple[Example, ...] = (
    Example(
        question="When does the last ferry leave for Gull Island on a Sunday?",
        answer_in="ferry-timetable.html",
    ),
    Example(
        question="How much does a 12-metre visiting yacht pay for a night's mooring in summer?",
        answer_in="mooring-fees.txt",
    ),
    Example(
        question="Can a deep-keeled boat enter the inner harbour at low tide?",
        answer_in="notice-tides",
    ),
)


@dataclass(frozen=True)
class DemoAnswer:
    """One example question: the results, and whether the expected document came first."""

    question: str
    answer_in: str
    first_is_expected: bool
    results: list[ResultItem]


@dataclass(frozen=True)
class DemoRun:
    """What the demo did (plain dataclasses: the CLI imports no engine before it runs)."""

    kb: str
    samples: str
    ingest: IngestReport
    answers: list[DemoAnswer]

    def to_json(self) -> str:
        """What ``flexmatch demo --json`` prints."""
        return json.dumps(
            {
                "kb": self.kb,
                "samples": self.samples,
                "ingest": self.ingest.model_dump(mode="json"),
                "answers": [
                    {
                        "question": a.question,
                        "answer_in": a.answer_in,
                        "first_is_expected": a.first_is_expected,
                        "results": [r.model_dump(mode="json") for r in a.results],
                    }
                    for a in self.answers
                ],
            },
            indent=2,
        )


def samples_dir() -> Path:
    """The sample corpus inside the installed package."""
    folder = Path(str(files("flexmatch") / "samples"))
    if not folder.is_dir():
        raise fm.ConfigError(f"the sample corpus is missing from the installation: {folder}")
    return folder


def names(result: ResultItem) -> set[str]:
    """What an example's ``answer_in`` may say for this result: its document id, or the
    file name at the end of its address."""
    return {result.document_id, Path(urlparse(result.uri).path).name}


def demo(
    kb: Annotated[
        Path,
        typer.Option(
            "--kb", help="Folder for the demo knowledge base (made if missing).", file_okay=False
        ),
    ] = Path("demo-kb"),
    top_n: Annotated[int, typer.Option("--top-n", min=1, max=20, help="Results a question.")] = 3,
    as_json: JsonOption = False,
) -> None:
    """Ingest the sample corpus the package ships into a knowledge base and answer three
    example questions: offline, no API key, no files of your own needed."""
    folder = kb.expanduser().resolve()
    created = not (folder / fm.CONFIG_FILE).exists()
    if created:
        fm.KnowledgeBase.init(folder)
    samples = samples_dir()
    with fm.KnowledgeBase.open(folder) as base:
        report = base.ingest([samples])
        answers = []
        for example in EXAMPLES:
            found = base.query(example.question, top_n=top_n)
            results = fm.tool_result(example.question, found).results
            first = bool(results) and example.answer_in in names(results[0])
            answers.append(
                DemoAnswer(
                    question=example.question,
                    answer_in=example.answer_in,
                    first_is_expected=first,
                    results=results,
                )
            )
        notices = base.notices
    run = DemoRun(kb=str(folder), samples=str(samples), ingest=report, answers=answers)
    if as_json:
        print(run.to_json())
    else:
        _print(run, created, notices)
    if report.failed or not all(a.first_is_expected for a in answers):
        raise typer.Exit(1)


def _print(run: DemoRun, created: bool, notices: list[str]) -> None:
    report = run.ingest
    console.print(f"[bold]Sample corpus:[/] {shown(run.samples)}")
    console.print(f"[bold]Knowledge base:[/] {shown(run.kb)}{' (created)' if created else ''}")
    written = (
        f"{report.chunks} chunks, {report.matching_texts} matching texts written"
        if report.chunks
        else "nothing to write"
    )
    console.print(
        f"Ingested {len(report.document_ids)} documents ({report.added} new, "
        f"{report.unchanged} unchanged): {written} in {report.seconds:.1f}s"
    )
    for failure in report.failed:
        errors.print(f"[red]failed:[/] {shown(failure.error)}")
    for notice in notices:
        errors.print(f"[yellow]note:[/] {shown(notice)}")
    for number, answer in enumerate(run.answers, 1):
        console.print(f"\n[bold]{number}. {shown(answer.question)}[/]")
        for r in answer.results:
            path = r.heading_path[1:] if r.heading_path[:1] == [r.title] else r.heading_path
            where = " › ".join(part for part in [r.title, *path] if part)
            name = Path(urlparse(r.uri).path).name or r.document_id
            console.print(f"  {r.rank}. {shown(where)}  [dim]({shown(name)}, {r.score:.3f})[/]")
        if answer.results:  # the text the first result was found by
            text = " ".join(answer.results[0].matched_text.split())
            cut = f"{text[:240]}…" if len(text) > 240 else text
            console.print(f"     [dim]matched:[/] {shown(cut)}")
        if not answer.first_is_expected:
            errors.print(f"[red]expected {shown(answer.answer_in)} first[/]")
    console.print(
        f'\nNext: [bold]flexmatch query --kb {shown(run.kb)} "your question"[/], '
        f"or ingest your own files with [bold]flexmatch ingest --kb {shown(run.kb)} PATH[/]."
    )


def register(app: typer.Typer) -> None:
    app.command()(demo)
