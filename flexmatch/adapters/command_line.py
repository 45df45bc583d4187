"""What every ``flexmatch`` command shares: the CLI's own commands and those the other
adapters add through the ``flexmatch.commands`` hook (``serve``, ``mcp``, ``agent-demo``).

The shared options (``--kb``, ``--tenant``, ``--json``, ``--as``/``--group``,
``--host``/``--port``) are defined once, so every command spells and explains them
alike, and so is how they resolve (``kb_folder``, ``reader``) and how tenant text reaches
the terminal (``shown``). ``COMMAND_PLUGINS`` is the hook's registry (docs/plugins.md):
the built-in commands' table below and the installed entry points, under the plug-in
spine's one failure rule (``flexmatch.plugins``). The CLI adds what it holds; an adapter
never imports the CLI, nor the CLI an adapter. Nothing here imports the knowledge base,
so ``flexmatch --help`` stays fast.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from flexmatch import plugins
from flexmatch.access import Principal
from flexmatch.errors import ConfigError

KbOption = Annotated[
    Path,
    typer.Option(
        "--kb",
        envvar="FLEXMATCH_KB",
        help="Knowledge-base folder ($FLEXMATCH_KB, else here).",
    ),  # a file is refused by ``kb_folder``, in one line
]
TenantOption = Annotated[str, typer.Option("--tenant", help="Tenant scope.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
AsOption = Annotated[
    str | None,
    typer.Option("--as", help="Search as this user (user:NAME): only what they may read."),
]
GroupOption = Annotated[
    list[str] | None,
    typer.Option("--group", help="A group of the user --as names (repeatable)."),
]
HostOption = Annotated[str, typer.Option(help="Interface to listen on.")]
PortOption = Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")]


def kb_folder(kb: Path) -> Path:
    """The folder ``--kb`` names, resolved, if it is a knowledge base (it holds a
    ``flexmatch.yaml``); else one line naming it and how to make one (exit 2). Without
    this a wrong folder answered "No results", and ``ingest`` made a store there that
    no config described."""
    from flexmatch.config import CONFIG_FILE  # with the command, not with `flexmatch --help`

    folder = kb.expanduser().resolve()
    init = f"create one with `flexmatch init {folder}`, or name one with --kb (or $FLEXMATCH_KB)"
    if not folder.exists():
        raise ConfigError(f"{folder} is not a knowledge-base folder: it does not exist; {init}")
    if not folder.is_dir():
        raise ConfigError(
            f"{folder} is a file, not a knowledge-base folder: name one with --kb (or "
            "$FLEXMATCH_KB)"
        )
    if not (folder / CONFIG_FILE).is_file():
        raise ConfigError(
            f"{folder} is not a knowledge-base folder: it has no {CONFIG_FILE}; {init}"
        )
    return folder


def reader(user: str | None, groups: list[str] | None) -> Principal | None:
    """The ``Principal`` that ``--as``/``--group`` name (None: neither, the operator's
    view of everything); a ``ConfigError`` when malformed."""
    if user is None and not groups:
        return None
    if user is not None and not user.startswith("user:"):
        raise ConfigError(f"--as {user[:80]!r} must be 'user:NAME'")
    return Principal.parse(user, groups or [])


# Stored and user text on the operator's terminal, shown as the text it is: a document
# title, a key name, a file name or an error quoting one is tenant text. Printed raw,
# ``[red]`` or ``[link=…]`` would be read as Rich markup, and an escape sequence
# (``\x1b]52;…`` writes the clipboard, ``\x1b[2J`` clears the screen, a carriage return
# overwrites the line, U+202E reverses it) would be obeyed by the terminal.
# C0 and C1 controls, DEL, and the invisible marks that reorder text (bidi overrides and
# isolates, the left-to-right and right-to-left marks).
_ONE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(value: object, *, lines: bool = False) -> str:
    """``value`` as Rich markup that prints exactly as its text: markup escaped, control
    characters written out visibly (``\\x1b``). Newlines and tabs stay with ``lines=True``
    (a chunk's text); otherwise they are written out too (a name, a table cell). Every
    command's print of tenant text goes through it."""
    text = (_LINES if lines else _ONE_LINE).sub(_visible, str(value))
    return escape(text)


AddCommands = Callable[[typer.Typer], None]
"""A command plug-in: given a ``typer.Typer``, it adds its command (or group) to it."""

# the built-in command plug-ins: the adapters the CLI starts, each adding its own command
BUILTIN_COMMANDS: tuple[tuple[str, str], ...] = (
    ("serve", "flexmatch.adapters.http.command:add_commands"),
    ("mcp", "flexmatch.adapters.mcp:add_commands"),
    ("agent-demo", "flexmatch.adapters.agent:add_commands"),
)


def _accept(name: str, obj: Any, origin: str) -> Iterable[tuple[str, AddCommands]]:
    """A callable taking the app; anything else is refused."""
    if not callable(obj) or isinstance(obj, type):
        raise TypeError(f"{type(obj).__name__} is not a function that adds commands to an app")
    return [(name, obj)]


COMMAND_PLUGINS: plugins.Registry[str, AddCommands] = plugins.Registry(
    plugins.COMMANDS, BUILTIN_COMMANDS, _accept
)
