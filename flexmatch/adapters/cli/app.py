"""The ``flexmatch`` command: a thin layer over ``KnowledgeBase``, one module per command
group, assembled here in the order ``flexmatch --help`` lists them.

The commands of other adapters (``serve``, ``mcp``, ``agent-demo``) and of installed
plug-ins come through the ``flexmatch.commands`` hook (``plugin_commands``): the CLI
imports no other adapter.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

import flexmatch as fm  # names load on first use: `flexmatch --help` imports no engine
from flexmatch.adapters.cli import (
    chains,
    demo,
    doctor,
    documents,
    evaluate,
    gaps,
    ingest,
    keys,
    query,
    setup,
    sync_command,
)
from flexmatch.adapters.cli.output import console, errors, shown
from flexmatch.adapters.cli.plugin_commands import add_plugin_commands

app = typer.Typer(
    help="FlexMatch: a question-indexed knowledge base for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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


app.command()(setup.prepare)
app.command()(setup.init)
app.command()(ingest.ingest)
app.command()(query.query)
app.command()(ingest.reindex)
app.command()(chains.chains)
app.command()(documents.stats)
app.command("eval")(evaluate.evaluate)
app.command()(gaps.gaps)
add_plugin_commands(app)  # serve, mcp, agent-demo, and every installed plug-in's
doctor.register(app)
demo.register(app)
sync_command.register(app)
app.add_typer(documents.docs_app, name="docs")
app.add_typer(keys.keys_app, name="keys")
app.add_typer(chains.prompts_app, name="prompts")


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
