"""The chains and prompts a knowledge base uses: ``flexmatch chains`` (the chain types
registered, and the chains each source and the query path use) and ``flexmatch
prompts``: the built-in prompts, and a copy of one in the knowledge base to edit
(``eject``), which the knowledge base then uses in place of the built-in one (its
``prompts/`` folder is searched first). Without it a user had to find the file in
site-packages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

import flexmatch as fm  # names load on first use
from flexmatch.adapters.cli.output import console, errors, open_kb, say_notices, shown
from flexmatch.adapters.command_line import JsonOption, KbOption, kb_folder

prompts_app = typer.Typer(
    help="The built-in prompts; copy one into the knowledge base to edit it.",
    no_args_is_help=True,
)


@prompts_app.command("list")
def prompts_list(kb: KbOption = Path(".")) -> None:
    """The built-in prompts, and which ones the knowledge base has its own copy of."""
    folder = kb_folder(kb)
    table = Table(title="Prompts")
    table.add_column("prompt", no_wrap=True)
    table.add_column("in use", overflow="fold")  # a path shown whole, folded if need be
    for name in fm.KnowledgeBase.builtin_prompts():
        own = folder / "prompts" / name
        table.add_row(shown(name), shown(own) if own.is_file() else "built-in")
    console.print(table)


@prompts_app.command("eject")
def prompts_eject(
    name: Annotated[str, typer.Argument(help="A built-in prompt (see prompts list).")],
    kb: KbOption = Path("."),
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite the knowledge base's own copy.")
    ] = False,
) -> None:
    """Copy a built-in prompt into the knowledge base's prompts/ folder to edit; the
    knowledge base uses that copy from then on."""
    target = fm.KnowledgeBase.eject_prompt(kb_folder(kb), name, force=force)
    console.print(f"Copied to {shown(target)}; edit it there.", soft_wrap=True)
    console.print(
        "Documents already ingested keep what the old prompt wrote: "
        "[bold]flexmatch reindex[/] re-indexes them (the LLM cache answers what did not change)."
    )


def chains(kb: KbOption = Path("."), as_json: JsonOption = False) -> None:
    """The chain types available, and the chains each source and the query path use."""
    kb_folder(kb)  # before anything is printed
    if as_json:
        with open_kb(kb) as base:
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
    with open_kb(kb) as base:
        used = Table(title="Chains in use")
        for column in ("where", "kind", "chain", "file"):
            used.add_column(column)
        for use in base.chains_in_use():
            used.add_row(*(shown(v) for v in (use.where, use.kind, use.chain, use.file)))
        console.print(used)
        say_notices(base)
