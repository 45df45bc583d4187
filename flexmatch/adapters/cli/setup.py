"""Setting up: ``flexmatch prepare`` (the local embedding model) and ``flexmatch init``
(a knowledge base from a template).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

import flexmatch as fm  # names load on first use: `flexmatch --help` imports no engine
from flexmatch.adapters.cli.output import console, shown

if TYPE_CHECKING:
    pass


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
