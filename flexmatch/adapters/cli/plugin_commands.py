"""The commands plug-ins add through the ``flexmatch.commands`` hook (docs/plugins.md):
``serve``, ``mcp`` and ``agent-demo`` from the HTTP, MCP and agent adapters, then any
installed package's, all the same way, so the CLI imports no other adapter.

The plug-in spine's failure rule, for commands: a plug-in that fails to load, raises as
it adds its command, or adds a name the CLI or another plug-in already has adds
nothing; its name becomes a command that says why, in one line, when run. No plug-in
replaces a command, and every other command works.
"""

from __future__ import annotations

import typer
from typer.main import get_command_name

import flexmatch as fm  # names load on first use
from flexmatch.adapters.command_line import COMMAND_PLUGINS

# a stand-in takes whatever it is given, to say why it cannot run rather than how to call it
_ANY_ARGUMENTS = {"allow_extra_args": True, "ignore_unknown_options": True}


def add_plugin_commands(app: typer.Typer) -> None:
    """Add every command plug-in's commands to ``app``, or a stand-in for a broken one."""
    taken = _names(app)
    COMMAND_PLUGINS.load()
    for name, add in list(COMMAND_PLUGINS.items.items()):  # the built-ins first, in order
        origin = f"{add.__module__}:{add.__qualname__}"
        trial = typer.Typer()  # what the plug-in adds is checked before the app takes it
        try:
            add(trial)
        except Exception as exc:  # any error of a plug-in's is the plug-in's
            COMMAND_PLUGINS.refuse(name, f"'{origin}' failed: {type(exc).__name__}: {exc}")
            continue
        clash = sorted(_names(trial) & taken)
        if clash:
            named = ", ".join(f"'{command}'" for command in clash)
            COMMAND_PLUGINS.refuse(name, f"'{origin}' was refused: {named} is taken")
            continue
        app.registered_commands += trial.registered_commands
        app.registered_groups += trial.registered_groups
        taken |= _names(trial)
    for name, reason in COMMAND_PLUGINS.failures().items():
        if name not in taken:
            _stand_in(app, name, reason)
            taken.add(name)


def _names(app: typer.Typer) -> set[str]:
    """The command and group names ``app`` has."""
    names = set()
    for info in app.registered_commands:
        if info.name or info.callback is not None:
            names.add(info.name or get_command_name(getattr(info.callback, "__name__", "")))
    for group in app.registered_groups:
        name = group.name or (group.typer_instance.info.name if group.typer_instance else None)
        if isinstance(name, str):
            names.add(name)
    return names


def _stand_in(app: typer.Typer, name: str, reason: str) -> None:
    """``flexmatch NAME`` for a broken plug-in: one line saying why (exit code 2)."""

    def broken() -> None:
        raise fm.ConfigError(f"command plug-in '{name}': {reason}")

    app.command(
        name,
        help="Not available: its plug-in is broken (run it to see why).",
        context_settings=_ANY_ARGUMENTS,
        add_help_option=False,
    )(broken)
