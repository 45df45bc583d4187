"""The ``flexmatch`` command: a thin layer over ``KnowledgeBase``."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.panel import Panel
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
from flexmatch.adapters.cli import agent_demo as agent_demo_command
from flexmatch.adapters.cli import demo as demo_command
from flexmatch.adapters.cli import doctor as doctor_command
from flexmatch.adapters.cli import prompts as prompts_command
from flexmatch.adapters.cli import service_commands, sync_command
from flexmatch.adapters.cli.interrupts import RunWatch, stopped_cleanly
from flexmatch.adapters.cli.options import (
    DEFAULT_TENANT,
    AsOption,
    GroupOption,
    JsonOption,
    KbOption,
    TenantOption,
    knowledge_base,
    reader,
)
from flexmatch.adapters.cli.output import shown
from flexmatch.adapters.cli.replicas import forget_cached_answers

if TYPE_CHECKING:
    from flexmatch import CostEstimate, IngestReport, ResultItem, Scores

app = typer.Typer(
    help="FlexMatch: a question-indexed knowledge base for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
docs_app = typer.Typer(help="List, show and remove documents.", no_args_is_help=True)
app.add_typer(docs_app, name="docs")
console = Console()
errors = Console(stderr=True)


def _open(kb: Path) -> fm.KnowledgeBase:
    """The knowledge base ``--kb`` names; a folder that is not one is refused."""
    return fm.KnowledgeBase.open(knowledge_base(kb))


def _version(show: bool) -> None:
    if show:
        console.print(f"flexmatch {fm.__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """FlexMatch: a question-indexed knowledge base for AI agents."""


def _say_notices(kb: fm.KnowledgeBase) -> None:
    for notice in kb.notices:
        errors.print(f"[yellow]note:[/] {shown(notice)}")


@app.command()
def prepare() -> None:
    """Export the packaged embedding model to ONNX Runtime once, fp32 and int8 (needs the
    'local' extra), so every later command starts without torch."""
    path = fm.prepare_local_model()
    console.print(f"Embedding models (fp32, int8) ready in {shown(str(path.parent))}")


def _list_templates(show: bool) -> None:
    if not show:
        return
    table = Table(title="Templates (flexmatch init DIR --template NAME)")
    table.add_column("name", no_wrap=True)
    table.add_column("what it is")
    for name, about in fm.KnowledgeBase.templates().items():
        table.add_row(shown(name), shown(about))
    console.print(table)
    raise typer.Exit()


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="Folder to create the knowledge base in.")],
    template: Annotated[
        str,
        typer.Option(
            help="Config template: default, a built-in setup (code, bm25, …: see "
            "--templates), or the path of a flexmatch.yaml."
        ),
    ] = "default",
    templates: Annotated[
        bool,
        typer.Option(
            "--templates", callback=_list_templates, is_eager=True, help="List the templates."
        ),
    ] = False,
) -> None:
    """Create a knowledge base: flexmatch.yaml plus chains/ and prompts/ for overrides."""
    path = fm.KnowledgeBase.init(directory, template)
    console.print(f"Created {shown(str(path))}")


@app.command()
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
    with _open(kb) as base:
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

            def progress(report: IngestReport) -> None:
                watch.seen(report)
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
            _say_notices(base)
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


@app.command()
def query(
    text: Annotated[str, typer.Argument(help="What to look for.")],
    kb: KbOption = Path("."),
    top_n: Annotated[int | None, typer.Option("--top-n", min=1, max=100)] = None,
    tenant: TenantOption = DEFAULT_TENANT,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON tool result.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the agent's facts block.")
    ] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show why each result matched (scores, ranks).")
    ] = False,
    filters: Annotated[
        list[str] | None,
        typer.Option("--filter", help="FIELD=VALUE (repeatable; tags, source, document_id, …)."),
    ] = None,
    as_user: AsOption = None,
    groups: GroupOption = None,
) -> None:
    """Answer a query with the chunks that best match it."""
    principal = reader(as_user, groups)
    with _open(kb) as base:
        answer = base.search(
            text,
            top_n=top_n,
            tenant=tenant,
            filters=_parse_filters(filters),
            principal=principal,
        )
        for warning in answer.warnings:
            errors.print(f"[yellow]warning:[/] {shown(warning)}")
        if as_json or markdown:
            chain = "json" if as_json else "markdown"
            output = base.run_sync(base.aformat_answer(answer, chain, explain=explain))
            sys.stdout.write(output.rstrip("\n") + "\n")
        else:
            _say_notices(base)
            result = fm.tool_result(
                text,
                answer.results,
                explain=explain,
                variants=answer.variants,
                warnings=answer.warnings,
            )
            _print_results(result.query, result.variants, result.results)


def _parse_filters(items: list[str] | None) -> dict[str, str | list[str]] | None:
    """``--filter tags=a --filter tags=b`` → {"tags": ["a", "b"]} (any of them)."""
    if not items:
        return None
    parsed: dict[str, list[str]] = {}
    for item in items:
        field, sep, value = item.partition("=")
        if not sep or not field.strip():
            raise typer.BadParameter(f"'{item}': expected FIELD=VALUE", param_hint="--filter")
        parsed.setdefault(field.strip(), []).append(value)
    return {k: v[0] if len(v) == 1 else v for k, v in parsed.items()}


def _explanation(r: ResultItem) -> str:
    s = r.explanation
    if s is None:
        return ""

    def show(value: float | None, rank: int | None = None) -> str:
        text = "—" if value is None else f"{value:.3f}"
        return f"{text} (#{rank})" if rank else text

    return (
        f"[dim]why:[/] dense {show(s.dense, s.dense_rank)} · question {show(s.question)} · "
        f"content {show(s.content)} · lexical {show(s.lexical, s.lexical_rank)} · "
        f"first stage {show(s.first_stage)} · rerank {show(s.rerank)}\n"
    )


def _print_results(text: str, variants: list[str] | None, results: list[ResultItem]) -> None:
    """Rich panels over the tool result (the same items ``--json`` prints)."""
    console.print(f"[bold]Query:[/] {shown(text)}")
    if variants:
        console.print(f"[dim]searched as:[/] {shown(' | '.join(variants))}")
    if not results:
        console.print("No results: the knowledge base holds nothing that matches.")
    for r in results:
        where = " › ".join(part for part in [r.title, *r.heading_path] if part)
        content = r.content if len(r.content) <= 700 else r.content[:700] + "…"
        body = (
            f"[dim]cite:[/] {shown(r.cite)}\n"
            f"[dim]source:[/] {shown(r.source)}  [dim]uri:[/] {shown(r.uri)}\n"
            f"[dim]matched:[/] {shown(r.matched_text[:300])}\n"
            + _explanation(r)
            + f"[dim]context:[/] {shown(r.qualifying_text, lines=True)}\n\n"
            + shown(content, lines=True)
        )
        title = f"{r.rank}. {shown(where)}  ({r.score:.3f})"
        console.print(Panel(body, title=title, title_align="left"))


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


@app.command()
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
    with _open(kb) as base:
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


@app.command()
def chains(kb: KbOption = Path("."), as_json: JsonOption = False) -> None:
    """The chain types available, and the chains each source and the query path use."""
    knowledge_base(kb)  # before anything is printed
    if as_json:
        with _open(kb) as base:
            uses = [use.model_dump() for use in base.chains_in_use()]
        console.print_json(json.dumps(uses, ensure_ascii=False))
        return
    table = Table(title="Registered chain types")
    table.add_column("kind")
    table.add_column("types")
    for kind, names in fm.registered_chains().items():
        table.add_row(shown(kind), shown(", ".join(names)))
    console.print(table)
    for what, broken in fm.broken_plugins().items():
        for plugin, reason in broken.items():
            note = f"{what} plug-in '{shown(plugin)}' is not used: {shown(reason)}"
            errors.print(f"[yellow]note:[/] {note}")
    with _open(kb) as base:
        used = Table(title="Chains in use")
        for column in ("where", "kind", "chain", "file"):
            used.add_column(column)
        for use in base.chains_in_use():
            used.add_row(*(shown(v) for v in (use.where, use.kind, use.chain, use.file)))
        console.print(used)
        _say_notices(base)


@docs_app.command("list")
def docs_list(
    kb: KbOption = Path("."),
    source: Annotated[str | None, typer.Option(help="Only this source.")] = None,
    tenant: TenantOption = DEFAULT_TENANT,
    as_json: JsonOption = False,
    as_user: AsOption = None,
    groups: GroupOption = None,
) -> None:
    """The documents in the knowledge base (with --as, those that user may read)."""
    principal = reader(as_user, groups)
    with _open(kb) as base:
        records = base.list_documents(source=source, tenant=tenant, principal=principal)
    if as_json:
        console.print_json(json.dumps([r.model_dump() for r in records], ensure_ascii=False))
        return
    table = Table(title=f"Documents ({len(records)}) in tenant '{shown(tenant)}'")
    table.add_column("id", no_wrap=True, min_width=24)  # whole, to copy (24 hex digits)
    for column in ("source", "title", "status", "chunks", "uri"):
        table.add_column(column, overflow="fold")
    for r in records:
        table.add_row(*(shown(v) for v in (r.id, r.source, r.title, r.status, r.chunks, r.uri)))
    console.print(table)


def _document_id(base: fm.KnowledgeBase, wanted: str, tenant: str) -> str:
    """The id of the one document ``wanted`` names: its id, an unambiguous start of its
    id, or its address (a file's path, as given or from here, or its URL)."""
    records = base.list_documents(tenant=tenant)
    if any(r.id == wanted for r in records):
        return wanted
    addresses = {wanted, str(Path(wanted).expanduser().resolve())}
    by_address = [r for r in records if r.uri in addresses]
    if len(by_address) == 1:
        return by_address[0].id
    candidates = by_address or [r for r in records if wanted and r.id.startswith(wanted)]
    if len(candidates) == 1:
        return candidates[0].id
    if not candidates:
        raise fm.DocumentNotFoundError(
            f"no document '{wanted}' in tenant '{tenant}' (by id, id prefix, path or URL; "
            "see flexmatch docs list)"
        )
    listed = "; ".join(f"{r.id} ({r.uri})" for r in candidates[:10])
    more = f" and {len(candidates) - 10} more" if len(candidates) > 10 else ""
    raise fm.DocumentNotFoundError(
        f"'{wanted}' names {len(candidates)} documents in tenant '{tenant}': {listed}{more}; "
        "give more of the id"
    )


@docs_app.command("show")
def docs_show(
    document_id: Annotated[
        str,
        typer.Argument(
            help="Document id, or the start of one, or the document's path or URL (see docs list)."
        ),
    ],
    kb: KbOption = Path("."),
    tenant: TenantOption = DEFAULT_TENANT,
    as_json: JsonOption = False,
) -> None:
    """A document's metadata, and its chunks with matching and qualifying texts."""
    with _open(kb) as base:
        detail = base.get_document(_document_id(base, document_id, tenant), tenant=tenant)
    if as_json:
        console.print_json(detail.model_dump_json())
        return
    record = detail.document
    console.print(f"[bold]{shown(record.title or record.id)}[/]  ({shown(record.uri)})")
    console.print(
        f"id {shown(record.id)} · source {shown(record.source)} · {record.status} · "
        f"{record.chunks} chunks · {record.matching_texts} matching texts · {record.updated_at}"
    )
    console.print(f"readable by: {shown(fm.describe_access(record.access))}")
    if record.error:
        console.print(f"[red]error:[/] {shown(record.error)}")
    for chunk in detail.chunks:
        texts = "\n".join(f"  • [{m.kind}] {shown(m.text[:200])}" for m in chunk.matching_texts)
        where = f"[dim]where:[/] {shown(chunk.location.label())}\n" if chunk.location else ""
        body = (
            f"{where}[dim]context:[/] {shown(chunk.qualifying_text, lines=True)}\n\n"
            f"{shown(chunk.content, lines=True)}"
        )
        heading = " › ".join(chunk.heading_path)
        console.print(
            Panel(
                f"{body}\n\n[dim]matching texts:[/]\n{texts}",
                title=f"chunk {chunk.index} {shown(heading)}",
                title_align="left",
            )
        )


@docs_app.command("access")
def docs_access(
    document_id: Annotated[
        str,
        typer.Argument(help="Document id, or an unambiguous start of one, or its path or URL."),
    ],
    principals: Annotated[
        list[str] | None,
        typer.Option("--principal", help="user:NAME or group:NAME who may read it (repeatable)."),
    ] = None,
    public: Annotated[
        bool, typer.Option("--public/--private", help="Readable by everyone, or only those named.")
    ] = False,
    tenant_wide: Annotated[
        bool,
        typer.Option("--tenant-wide", help="Drop its access list: the whole tenant reads it."),
    ] = False,
    kb: KbOption = Path("."),
    tenant: TenantOption = DEFAULT_TENANT,
) -> None:
    """Change who may read a document (its points are updated; nothing is re-embedded)."""
    if tenant_wide and (principals or public):
        raise fm.ConfigError("--tenant-wide drops the access list: give no --principal/--public")
    wanted = {"public": public, "principals": principals or []}
    access = None if tenant_wide else fm.parse_access(wanted, "docs access")
    with _open(kb) as base:
        document_id = _document_id(base, document_id, tenant)
        record = base.set_access(document_id, access, tenant=tenant)
    console.print(f"{shown(document_id)} is readable by {shown(fm.describe_access(record.access))}")


@docs_app.command("remove")
def docs_remove(
    document_id: Annotated[
        str,
        typer.Argument(help="Document id, or an unambiguous start of one, or its path or URL."),
    ],
    kb: KbOption = Path("."),
    tenant: TenantOption = DEFAULT_TENANT,
) -> None:
    """Remove a document and everything derived from it."""
    with _open(kb) as base:
        document_id = _document_id(base, document_id, tenant)
        base.remove_document(document_id, tenant=tenant)
        forget_cached_answers(base, tenant, errors)
    console.print(f"Removed {shown(document_id)}")


@app.command()
def stats(
    kb: KbOption = Path("."), tenant: TenantOption = DEFAULT_TENANT, as_json: JsonOption = False
) -> None:
    """Documents, chunks and matching texts per source; incomplete documents; store size."""
    with _open(kb) as base:
        result = base.stats(tenant=tenant)
    if as_json:
        console.print_json(result.model_dump_json())
        return
    table = Table(title=f"Tenant '{shown(tenant)}'")
    for column in ("source", "documents", "chunks", "matching texts"):
        table.add_column(column)
    for name, counts in sorted(result.sources.items()):
        table.add_row(
            shown(name), str(counts.documents), str(counts.chunks), str(counts.matching_texts)
        )
    table.add_row(
        "[bold]all", str(result.documents), str(result.chunks), str(result.matching_texts)
    )
    console.print(table)
    size = "n/a (server)" if result.store_bytes is None else f"{result.store_bytes / 1e6:.1f} MB"
    console.print(f"incomplete documents: {result.incomplete_documents} · store size: {size}")


@app.command("eval")
def evaluate(
    dataset: Annotated[
        Path, typer.Argument(help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/.")
    ],
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
) -> None:
    """Measure retrieval quality (nDCG@10, recall@5/10, MRR@10, latency) of setups side by side."""
    import tempfile

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


service_commands.register(app)
doctor_command.register(app)
demo_command.register(app)
prompts_command.register(app)
agent_demo_command.register(app)
sync_command.register(app)


def main() -> None:
    """Entry point: user errors are one clear line and exit code 2, never a traceback."""
    # pydantic scans every installed package for plug-ins on first use: not for a CLI
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        app()
    except fm.FlexMatchError as exc:
        errors.print(f"[red]error:[/] {shown(str(exc))}", soft_wrap=True)  # one line
        sys.exit(2)
    except KeyboardInterrupt:
        errors.print("[red]interrupted[/]")
        sys.exit(130)


if __name__ == "__main__":
    main()
