"""CLI commands for the service interfaces: ``serve`` (HTTP API), ``keys`` (its API keys)
and ``mcp`` (the MCP server); registered onto the main app.

Every CLI start runs ``register``, so FastAPI, uvicorn and the MCP SDK are imported only
inside the commands that use them, keeping ``flexmatch --help`` fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.table import Table

import flexmatch as fm  # names load on first use
import flexmatch.service as fm_service
from flexmatch.adapters.cli.options import (
    AsOption,
    GroupOption,
    KbOption,
    knowledge_base,
    reader,
)
from flexmatch.adapters.cli.output import shown

HostOption = Annotated[str, typer.Option(help="Interface to listen on.")]
PortOption = Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")]

console = Console()


def _kb_folder(kb: Path) -> Path:
    return knowledge_base(kb)


def serve(
    kb: KbOption = Path("."),
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    max_body_mb: Annotated[
        float, typer.Option(min=0.001, help="Largest request body (uploads), in MB.")
    ] = 64.0,
    max_query_chars: Annotated[int, typer.Option(min=1, help="Longest query.")] = 2_000,
    rate: Annotated[
        float, typer.Option(min=0, help="Requests per second per API key (0: no limit).")
    ] = 10.0,
    burst: Annotated[int, typer.Option(min=1, help="Requests a key may make at once.")] = 30,
    log_level: Annotated[
        str, typer.Option(help="Log level: debug, info (an access-log line per request), warning.")
    ] = "info",
    log_format: Annotated[
        str,
        typer.Option(
            envvar="FLEXMATCH_LOG_FORMAT",
            help="text (for a terminal) or json (one object per line, for a log collector); "
            "also FLEXMATCH_LOG_FORMAT.",
        ),
    ] = "text",
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            max=64,
            help="Server processes; more than one needs store.url (a Qdrant server).",
        ),
    ] = 1,
) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json, docs at /docs)."""
    fm_service.require_extra("fastapi", "server", "flexmatch serve")
    from flexmatch.adapters.http.limits import Limits
    from flexmatch.adapters.http.server import serve as run_server

    if log_format not in ("text", "json"):
        raise typer.BadParameter("use text or json", param_hint="--log-format")
    chosen_format: Literal["text", "json"] = "json" if log_format == "json" else "text"
    limits = Limits(
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        max_query_chars=max_query_chars,
        rate_per_second=rate,
        burst=burst,
    )
    run_server(
        _kb_folder(kb),
        host=host,
        port=port,
        limits=limits,
        log_level=log_level,
        log_format=chosen_format,
        workers=workers,
    )


def mcp(
    kb: KbOption = Path("."),
    tenant: Annotated[
        str, typer.Option(help="The tenant served over stdio (or over HTTP with --no-auth).")
    ] = "default",
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Offer no tools that write.")
    ] = False,
    transport: Annotated[
        str, typer.Option(help="stdio, or http (streamable HTTP at /mcp).")
    ] = "stdio",
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    no_auth: Annotated[
        bool,
        typer.Option("--no-auth", help="HTTP without API keys (loopback only): serves --tenant."),
    ] = False,
    as_user: AsOption = None,
    group: GroupOption = None,
) -> None:
    """Serve the knowledge base as an MCP server (stdio, or streamable HTTP where every
    call needs an API key from 'flexmatch keys create')."""
    fm_service.require_extra("mcp", "mcp", "flexmatch mcp")
    from flexmatch.adapters.mcp import run

    if transport not in ("stdio", "http"):
        raise typer.BadParameter("use stdio or http", param_hint="--transport")
    chosen: Literal["stdio", "http"] = "stdio" if transport == "stdio" else "http"
    run(
        _kb_folder(kb),
        tenant=tenant,
        read_only=read_only,
        transport=chosen,
        host=host,
        port=port,
        auth=not no_auth,
        principal=reader(as_user, group),  # without keys: the end user it reads as
    )


keys_app = typer.Typer(
    help="API keys for the HTTP API: a tenant and permissions each, stored hashed.",
    no_args_is_help=True,
)


@keys_app.command("create")
def keys_create(
    kb: KbOption = Path("."),
    tenant: Annotated[str, typer.Option(help="The tenant the key is scoped to.")] = "default",
    permissions: Annotated[str, typer.Option(help="Comma-separated: read, write, admin.")] = "read",
    name: Annotated[str, typer.Option(help="A note on who or what uses the key.")] = "",
    principal: Annotated[
        str | None, typer.Option(help="A person's key: it reads as user:NAME.")
    ] = None,
    groups: Annotated[
        list[str] | None, typer.Option("--group", help="That person's group (repeatable).")
    ] = None,
    service: Annotated[
        bool, typer.Option(help="A service key: it names the end user on each request.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Create a key and print it once (only its hash is stored). Without --principal or
    --service, a read or write key reads only what the whole tenant may (see
    docs/security.md, "Access control")."""
    identity = fm_service.key_identity(principal, groups or [], service=service)
    store = fm_service.KeyStore.for_kb(_kb_folder(kb))
    key, token = store.create(tenant, permissions, name, identity)
    if as_json:
        console.print_json(json.dumps({"token": token, **key.model_dump()}))
        return
    console.print(token, markup=False, highlight=False, soft_wrap=True)
    Console(stderr=True).print(
        f"key {key.id} for tenant '{shown(key.tenant)}' ({', '.join(key.permissions)}); "
        "store it now: it cannot be shown again"
    )


def _reads_as(key: fm_service.ApiKey) -> str:
    """Who a key reads documents as, in a few words (docs/security.md, "Access control")."""
    if "admin" in key.permissions:
        return "everything"
    if key.identity is not None and key.identity.service:
        return "the user each request names"
    if key.identity is not None:
        return key.identity.principal().label()
    return "the whole tenant's"


@keys_app.command("list")
def keys_list(
    kb: KbOption = Path("."),
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The keys (never their secrets), revoked ones included."""
    keys = fm_service.KeyStore.for_kb(_kb_folder(kb)).list(tenant)
    if as_json:
        console.print_json(json.dumps([k.model_dump() for k in keys]))
        return
    table = Table(title=f"API keys ({len(keys)})")
    for column in ("id", "tenant", "permissions", "reads as", "name", "created", "state"):
        table.add_column(column)
    for k in keys:
        state = f"revoked {k.revoked_at}" if k.revoked else "active"
        reads = _reads_as(k)
        cells = (k.id, k.tenant, ",".join(k.permissions), reads, k.name, k.created_at, state)
        table.add_row(*(shown(cell) for cell in cells))
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (see keys list).")],
    kb: KbOption = Path("."),
) -> None:
    """Revoke a key; a running server refuses it from its next request."""
    if not fm_service.KeyStore.for_kb(_kb_folder(kb)).revoke(key_id):
        raise fm.KeyRequestError(f"no key '{key_id}'")
    console.print(f"Revoked {shown(key_id)}")


def register(app: typer.Typer) -> None:
    """Add ``serve``, ``keys`` and ``mcp`` to the main ``flexmatch`` app."""
    app.command()(serve)
    app.add_typer(keys_app, name="keys")
    app.command()(mcp)
