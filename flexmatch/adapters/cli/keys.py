"""``flexmatch keys``: the API keys of the HTTP API and the MCP server over HTTP (their
commands, ``serve`` and ``mcp``, come with those adapters through the
``flexmatch.commands`` hook).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

import flexmatch as fm  # names load on first use
import flexmatch.service as fm_service
from flexmatch.adapters.cli.output import console, shown
from flexmatch.adapters.command_line import KbOption, kb_folder

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
    store = fm_service.KeyStore.for_kb(kb_folder(kb))
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
    if fm_service.grants(key.permissions, "admin"):
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
    keys = fm_service.KeyStore.for_kb(kb_folder(kb)).list(tenant)
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
    if not fm_service.KeyStore.for_kb(kb_folder(kb)).revoke(key_id):
        raise fm.KeyRequestError(f"no key '{key_id}'")
    console.print(f"Revoked {shown(key_id)}")
