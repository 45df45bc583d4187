"""Putting documents in: ``flexmatch ingest`` (with ``--dry-run``, what it would cost)
and ``flexmatch reindex``, and the report both print.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

import flexmatch as fm  # names load on first use: `flexmatch --help` imports no engine
from flexmatch import DEFAULT_TENANT
from flexmatch.adapters.cli.interrupts import RunWatch, stopped_cleanly
from flexmatch.adapters.cli.output import console, errors, open_kb, say_notices, shown
from flexmatch.adapters.cli.replicas import forget_cached_answers
from flexmatch.adapters.command_line import JsonOption, KbOption, TenantOption

if TYPE_CHECKING:
    from flexmatch import CostEstimate, IngestReport

PROGRESS_EVERY = 1.0  # seconds between two progress events of `ingest --json` at most


def ingest(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(help="Files, folders, .jsonl corpora or http(s) URLs.", show_default=False),
    ] = None,
    kb: KbOption = Path("."),
    source: Annotated[str | None, typer.Option(help="Source (from flexmatch.yaml).")] = None,
    tenant: TenantOption = DEFAULT_TENANT,
    as_json: JsonOption = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Read and chunk, estimate LLM calls, tokens and cost; store nothing."
        ),
    ] = False,
    ray: Annotated[
        bool,
        typer.Option(
            "--ray",
            help="Parse, enrich and embed on Ray workers (a local Ray cluster unless "
            "--ray-address names one); needs the 'ray' extra.",
        ),
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            metavar="ADDRESS",
            help="Join this Ray cluster ('auto': the one `ray start` runs here); implies --ray.",
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="Ray workers (with --ray), one CPU each.")
    ] = 2,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="Then remove the source's documents this run no longer found (files "
            "deleted under its paths, pages gone); run without inputs, for a source with "
            "paths (files, records) or a web source. With --dry-run: what it would remove.",
        ),
    ] = False,
) -> None:
    """Load, chunk, enrich, embed and store documents; unchanged ones cost nothing."""
    on_ray: bool | str = ray_address or ray
    with open_kb(kb) as base:
        if dry_run:
            estimate = base.run_sync(
                base.aestimate(inputs or [], source=source, prune=prune, tenant=tenant)
            )
            _warn_of_a_missing_key(base)
            if as_json:
                sys.stdout.write(estimate.model_dump_json(indent=2) + "\n")
            else:
                console.print(
                    f"{estimate.documents} documents, ~{estimate.document_tokens:,} tokens"
                )
                _print_estimate(estimate)
                _print_footprint(estimate)
                _print_would_fail(estimate)
            if not (estimate.documents or estimate.failed or estimate.skipped):
                raise typer.BadParameter("nothing to ingest: name files, folders or URLs")
            if estimate.failed:  # as the real run would exit
                raise typer.Exit(2)
            return
        columns = (
            TextColumn("[bold]ingest"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
        )
        watch = RunWatch(base, tenant)
        with Progress(*columns, console=errors, transient=True, disable=as_json) as bar:
            task_id = bar.add_task("ingest", total=None, detail="")

            started = time.monotonic()
            said = [0.0]  # when the last progress event was written (--json)

            def progress(report: IngestReport) -> None:
                watch.seen(report)
                if as_json:
                    now = time.monotonic()
                    if now - said[0] >= PROGRESS_EVERY or report.processed >= report.planned:
                        said[0] = now
                        line = report.progress(now - started).model_dump_json()
                        sys.stderr.write(line + "\n")
                        sys.stderr.flush()
                    return
                detail = (
                    f"{report.chunks} chunks · {report.usage.calls} LLM calls"
                    f" · {len(report.failed)} failed"
                )
                bar.update(task_id, total=report.planned, completed=report.processed, detail=detail)

            # Ray prints its notices (a worker died, …) on standard output, which is this
            # command's result (--json): they go to standard error with the progress
            try:
                with (
                    contextlib.redirect_stdout(sys.stderr) if on_ray else contextlib.nullcontext(),
                    stopped_cleanly(watch, errors, as_json),
                ):
                    report = base.ingest(
                        inputs or [],
                        source=source,
                        tenant=tenant,
                        progress=progress,
                        ray=on_ray,
                        workers=workers,
                        prune=prune,
                    )
            finally:
                forget_cached_answers(base, tenant, errors)
        if report.planned == 0:
            raise typer.BadParameter("nothing to ingest: name files, folders or URLs")
        if not as_json:
            say_notices(base)
    if as_json:
        console.print_json(report.model_dump_json())
    else:
        _print_report(report)
    if report.failed:  # each one was named on its own line; the rest is stored
        raise typer.Exit(2)


def _print_report(report: IngestReport) -> None:
    usage = report.usage
    console.print(
        f"Ingested [bold]{report.documents}[/] documents ({report.added} new, "
        f"{report.changed} changed; {report.unchanged} unchanged, "
        f"{len(report.duplicates)} duplicates skipped) → {report.chunks} chunks, "
        f"{report.matching_texts} matching texts in {report.seconds:.1f}s"
    )
    if report.index_seconds:
        console.print(f"Search index (HNSW) built in {report.index_seconds:.1f}s")
    if report.texts_reused:
        console.print(
            f"Embedded {report.texts_embedded} matching texts; {report.texts_reused} "
            "unchanged ones kept their stored vectors"
        )
    if report.near_duplicate_chunks or report.repaired:
        console.print(
            f"{report.near_duplicate_chunks} near-duplicate chunks skipped; "
            f"{report.repaired} interrupted documents repaired"
        )
    console.print(
        f"LLM: {usage.calls} calls ({usage.cached_calls} from cache), "
        f"{usage.prompt_tokens + usage.completion_tokens} tokens, ${usage.cost_usd:.4f}"
    )
    if report.not_modified:
        console.print(
            f"{report.not_modified} of the unchanged not modified at their source: "
            "nothing fetched or parsed"
        )
    if report.removed:
        console.print(f"Pruned {len(report.removed)} documents gone from the source")
    for uri in report.removed:
        console.print(f"[yellow]removed:[/] {shown(uri)}")
    for warning in report.warnings:
        errors.print(f"[yellow]warning:[/] {shown(warning)}")
    for skipped in report.duplicates:
        errors.print(f"[yellow]skipped:[/] {shown(skipped.uri)}: {shown(skipped.reason)}")
    _print_skipped(report)
    alike: dict[str, list[str]] = {}  # one cause (a refused LLM key) is said once
    for failure in report.failed:
        alike.setdefault(failure.error, []).append(failure.uri)
    for error, uris in alike.items():
        if len(uris) == 1:
            errors.print(f"[red]failed:[/] {shown(error)}")
            continue
        named = ", ".join(shown(uri) for uri in uris[:3]) + (", ..." if len(uris) > 3 else "")
        errors.print(f"[red]failed ({len(uris)} documents: {named}):[/] {shown(error)}")


def _print_skipped(report: IngestReport) -> None:
    """Files a folder walk passed over: one line per reason (how many, a few names, and
    for unsupported types which suffixes), the readable suffixes said once."""
    by_reason: dict[str, list[str]] = {}
    for skipped in report.skipped_files:
        by_reason.setdefault(skipped.skipped or "", []).append(skipped.uri)
    for reason, uris in by_reason.items():
        names = [Path(uri).name for uri in uris]
        shown_names = ", ".join(shown(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
        kinds = ""
        if reason == "unsupported type":
            counts: dict[str, int] = {}
            for name in names:
                suffix = Path(name).suffix.lower() or "(none)"
                counts[suffix] = counts.get(suffix, 0) + 1
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            kinds = " [" + ", ".join(f"{s} {n}" for s, n in ranked[:8]) + "]"
        many = "file" if len(uris) == 1 else "files"
        errors.print(f"[yellow]skipped ({reason}):[/] {len(uris)} {many}{kinds}: {shown_names}")
    if "unsupported type" in by_reason:
        readable = ", ".join(fm.readable_suffixes())
        errors.print(f"[dim]read: {readable}, and text files of any name[/]")


def _warn_of_a_missing_key(base: fm.KnowledgeBase) -> None:
    """A dry run says what the real run would fail on for want of an LLM key."""
    problem = base.llm.credential_problem() if base.llm is not None else None
    if problem is not None:
        errors.print(f"[yellow]warning:[/] {shown(problem)}")


def _print_would_fail(estimate: CostEstimate) -> None:
    """What the real run would fail on, each with its reason, and what it would skip."""
    if estimate.skipped:
        counts = ", ".join(f"{n} {why}" for why, n in sorted(estimate.skipped.items()))
        console.print(f"would skip: {counts}")
    for failure in estimate.failed:
        errors.print(f"[red]would fail:[/] {shown(failure.error)}", soft_wrap=True)
    for uri in estimate.removed:
        console.print(f"would remove: {shown(uri)}", soft_wrap=True)
    for warning in estimate.warnings:
        errors.print(f"[yellow]{shown(warning)}[/]", soft_wrap=True)


def _print_estimate(estimate: CostEstimate) -> None:
    price = f"${estimate.cost_usd:.4f}"
    if estimate.unpriced_models:
        price += f" (no price known for {', '.join(estimate.unpriced_models)})"
    console.print(
        f"{estimate.chunks} chunks · {estimate.llm_calls} LLM calls to pay for "
        f"({estimate.cached_calls} answered by the cache) · ~{estimate.prompt_tokens:,} prompt "
        f"+ ~{estimate.completion_tokens:,} completion tokens · ~{price}"
    )


def _print_footprint(estimate: CostEstimate) -> None:
    """What the run would take of this machine: time, peak memory, disk."""
    if estimate.seconds is None:
        took = f"reading ~{_duration(estimate.read_seconds)}; embedding not timed (a remote model)"
    else:
        took = (
            f"~{_duration(estimate.seconds)} (reading {_duration(estimate.read_seconds)}, "
            f"embedding {estimate.matching_texts:,} matching texts at "
            f"~{estimate.embedded_per_second:,.0f}/s"
        )
        took += f"; {estimate.llm_calls} LLM calls not timed)" if estimate.llm_calls else ")"
    memory = estimate.peak_memory_bytes
    shown_memory = f" · peak memory ~{_size(memory)}" if memory is not None else ""
    console.print(f"time {took}{shown_memory} · disk ~{_size(estimate.disk_bytes)}")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _size(size: int) -> str:
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


def reindex(
    kb: KbOption = Path("."),
    source: Annotated[str | None, typer.Option(help="Only this source.")] = None,
    tenant: TenantOption = DEFAULT_TENANT,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would change and cost; change nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Re-index the documents whose chains changed (YAML, params, prompt text or model),
    from the knowledge base's stored copies; the LLM cache serves unchanged chains."""
    with open_kb(kb) as base:
        plan = base.run_sync(base.areindex_plan(source=source, tenant=tenant))
        if dry_run:
            _warn_of_a_missing_key(base)
            if as_json:
                sys.stdout.write(plan.model_dump_json(indent=2) + "\n")
                return
            console.print(
                f"{len(plan.stale)} of {plan.documents} documents would be re-indexed"
                + (f" ({len(plan.missing)} have no stored copy)" if plan.missing else "")
            )
            _print_estimate(plan.estimate)
            for document_id in plan.missing:
                errors.print(f"[yellow]no stored copy:[/] {shown(document_id)}")
            return
        watch = RunWatch(base, tenant)
        with stopped_cleanly(watch, errors, as_json):
            report = base.reindex(source=source, tenant=tenant, progress=watch.seen)
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        _print_report(report)
    if report.failed:
        raise typer.Exit(2)
