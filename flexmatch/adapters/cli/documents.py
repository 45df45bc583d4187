"""What the knowledge base holds: ``flexmatch docs`` (list, show, access, remove, unlearn)
and ``flexmatch stats``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.panel import Panel
from rich.table import Table

import flexmatch as fm  # names load on first use: `flexmatch --help` imports no engine
from flexmatch import DEFAULT_TENANT
from flexmatch.adapters.cli.output import console, errors, open_kb, shown
from flexmatch.adapters.cli.replicas import forget_cached_answers
from flexmatch.adapters.command_line import (
    AsOption,
    GroupOption,
    JsonOption,
    KbOption,
    TenantOption,
    reader,
)

if TYPE_CHECKING:
    pass


docs_app = typer.Typer(help="List, show and remove documents.", no_args_is_help=True)


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
    with open_kb(kb) as base:
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
    with open_kb(kb) as base:
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
        texts = "\n".join(_matching_line(m) for m in chunk.matching_texts)
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


def _matching_line(text: fm.MatchingText) -> str:
    """One matching text; a learned one with how many marked it helpful, the last of
    them (who, when) and its id (what ``docs unlearn`` takes)."""
    line = f"  • {shown(f'[{text.kind}]')} {shown(text.text[:200])}"
    learned = text.learned
    if learned is None:
        return line
    last = learned.marks[-1] if learned.marks else None
    by = f", last by {shown(last.who)} at {last.at}" if last else ""
    return f"{line}\n    [dim]{learned.count}× helpful{by} · id {learned.id}[/]"


@docs_app.command("unlearn")
def docs_unlearn(
    learned_id: Annotated[
        str, typer.Argument(help="A learned matching text's id (docs show lists them).")
    ],
    kb: KbOption = Path("."),
    tenant: TenantOption = DEFAULT_TENANT,
) -> None:
    """Remove a learned matching text (a query someone marked a chunk helpful for)."""
    with open_kb(kb) as base:
        base.remove_learned(learned_id, tenant=tenant)
        forget_cached_answers(base, tenant, errors)
    console.print(f"Removed learned matching text {shown(learned_id)}")


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
    with open_kb(kb) as base:
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
    with open_kb(kb) as base:
        document_id = _document_id(base, document_id, tenant)
        base.remove_document(document_id, tenant=tenant)
        forget_cached_answers(base, tenant, errors)
    console.print(f"Removed {shown(document_id)}")


def stats(
    kb: KbOption = Path("."), tenant: TenantOption = DEFAULT_TENANT, as_json: JsonOption = False
) -> None:
    """Documents, chunks and matching texts per source; incomplete documents; store size."""
    with open_kb(kb) as base:
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
