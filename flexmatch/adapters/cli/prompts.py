"""``flexmatch prompts``: the built-in prompts, and a copy of one in the knowledge base to
edit (``eject``), which the knowledge base then uses in place of the built-in one (its
``prompts/`` folder is searched first). Without it a user had to find the file in
site-packages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

import flexmatch as fm  # names load on first use
from flexmatch.adapters.cli.options import KbOption, knowledge_base
from flexmatch.adapters.cli.output import shown

console = Console()
prompts_app = typer.Typer(
    help="The built-in prompts; copy one into the knowledge base to edit it.",
    no_args_is_help=True,
)


@prompts_app.command("list")
def prompts_list(kb: KbOption = Path(".")) -> None:
    """The built-in prompts, and which ones the knowledge base has its own copy of."""
    folder = knowledge_base(kb)
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
    target = fm.KnowledgeBase.eject_prompt(knowledge_base(kb), name, force=force)
    console.print(f"Copied to {shown(target)}; edit it there.", soft_wrap=True)
    console.print(
        "Documents already ingested keep what the old prompt wrote: "
        "[bold]flexmatch reindex[/] re-indexes them (the LLM cache answers what did not change)."
    )


def register(app: typer.Typer) -> None:
    """Add ``prompts`` to the main ``flexmatch`` app."""
    app.add_typer(prompts_app, name="prompts")
