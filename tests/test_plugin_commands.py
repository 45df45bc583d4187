"""The ``flexmatch.commands`` hook: an installed package (a dist-info on PYTHONPATH) adds a
command to the real ``flexmatch`` CLI, as ``serve``, ``mcp`` and ``agent-demo`` come from
their adapters; a broken command plug-in is named when run, blocks no other command and
replaces none."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import flexmatch
from flexmatch.adapters.cli.plugin_commands import add_plugin_commands
from tests.conftest import run, write_config

PLUGIN = '''
"""A command counting a knowledge base's chain files, and three ways to be broken."""

from pathlib import Path

import typer

from flexmatch.adapters.command_line import KbOption, kb_folder


def add_commands(app):
    @app.command("shelf-count")
    def shelf_count(kb: KbOption = Path(".")) -> None:
        """Count the knowledge base's own chain files."""
        found = sorted(p.name for p in (kb_folder(kb) / "chains").glob("*.yaml"))
        typer.echo(f"{len(found)} chain files: {', '.join(found)}")


def explode(app):
    raise RuntimeError("no shelf here")


def grab_ingest(app):
    @app.command("ingest")
    def mine() -> None:
        typer.echo("not the real ingest")
'''

ENTRY_POINTS = """\
[flexmatch.commands]
shelf-count = fm_tools:add_commands
gone = fm_tools_gone:add_commands
explodes = fm_tools:explode
grabby = fm_tools:grab_ingest
odd = fm_tools:PLUGIN_NAME
"""


def _site(folder: Path) -> Path:
    """The plug-in package, installed: its module and its dist-info."""
    folder.mkdir(parents=True)
    module = textwrap.dedent(PLUGIN) + 'PLUGIN_NAME = "fm-tools"\n'
    (folder / "fm_tools.py").write_text(module, encoding="utf-8")
    info = folder / "fm_tools-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fm-tools\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return folder


def test_a_plug_in_command_runs_in_the_real_cli_beside_the_built_in_ones(tmp_path: Path) -> None:
    site = _site(tmp_path / "site")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": path}
    kb = tmp_path / "kb"
    write_config(kb, "query:\n  query_transform: identity\n")
    (kb / "chains").mkdir()
    (kb / "chains" / "lines.yaml").write_text("kind: chunker\ntype: window\n")

    listed = run("--help", env=env)
    assert listed.returncode == 0, listed.stderr
    for command in ("shelf-count", "serve", "mcp", "agent-demo", "ingest", "gone", "explodes"):
        assert f" {command} " in listed.stdout, command

    counted = run("shelf-count", "--kb", str(kb), env=env)
    assert counted.returncode == 0, counted.stderr
    assert counted.stdout.strip() == "1 chain files: lines.yaml"

    gone = run("gone", "--kb", str(kb), env=env)
    assert gone.returncode == 2
    said = " ".join(gone.stderr.split())
    assert "command plug-in 'gone': 'fm_tools_gone:add_commands' failed to load" in said
    assert "Traceback" not in gone.stderr

    ingest = run("ingest", "--help", env=env)  # the built-in: no plug-in replaces it
    assert ingest.returncode == 0 and "Load, chunk, enrich, embed and store" in ingest.stdout


@pytest.mark.usefixtures("fresh_plugins")
def test_a_broken_command_plug_in_is_named_and_blocks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(_site(tmp_path / "site")))
    app = typer.Typer()

    @app.command()
    def ingest() -> None:
        """The app's own command."""
        typer.echo("the real ingest")

    @app.command()
    def query() -> None:  # a second command: typer then needs the command's name
        typer.echo("a query")

    add_plugin_commands(app)
    runner = CliRunner()
    names = [info.name or info.callback.__name__ for info in app.registered_commands]
    # the built-ins first, in their order, then the plug-ins; the broken ones say why
    assert names[:5] == ["ingest", "query", "serve", "mcp", "agent-demo"]
    assert set(names[5:]) == {"shelf-count", "gone", "explodes", "grabby", "odd"}

    assert runner.invoke(app, ["ingest"]).stdout == "the real ingest\n"
    kb = tmp_path / "kb"
    write_config(kb, "query:\n  query_transform: identity\n")
    counted = runner.invoke(app, ["shelf-count", "--kb", str(kb)])
    assert counted.exit_code == 0 and counted.stdout == "0 chain files: \n"

    reasons = {
        "gone": "'fm_tools_gone:add_commands' failed to load: ModuleNotFoundError",
        "explodes": "'fm_tools:explode' failed: RuntimeError: no shelf here",
        "grabby": "'fm_tools:grab_ingest' was refused: 'ingest' is taken",
        "odd": "'fm_tools:PLUGIN_NAME' was refused: str is not a function that adds",
    }
    for name, reason in reasons.items():
        broken = runner.invoke(app, [name, "--kb", "anything"])
        assert isinstance(broken.exception, flexmatch.ConfigError), name
        assert str(broken.exception).startswith(f"command plug-in '{name}': {reason}")
