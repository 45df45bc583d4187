"""Options every ``flexmatch`` command shares, defined once."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # flexmatch's names load on first use, not with the command line
    from flexmatch import Principal

KbOption = Annotated[
    Path,
    typer.Option(
        "--kb",
        envvar="FLEXMATCH_KB",
        help="Knowledge-base folder ($FLEXMATCH_KB, else here).",
    ),  # a file is refused by ``knowledge_base``, in one line
]
TenantOption = Annotated[str, typer.Option("--tenant", help="Tenant scope.")]
DEFAULT_TENANT = "default"  # the same as flexmatch.DEFAULT_TENANT, without importing it
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def knowledge_base(kb: Path) -> Path:
    """The folder ``--kb`` names, resolved, if it is a knowledge base (it holds a
    ``flexmatch.yaml``); else one line naming it and how to make one (exit 2). Without
    this a wrong folder answered "No results", and ``ingest`` made a store there that
    no config described."""
    import flexmatch as fm  # names load on first use

    folder = kb.expanduser().resolve()
    init = f"create one with `flexmatch init {folder}`, or name one with --kb (or $FLEXMATCH_KB)"
    if not folder.exists():
        raise fm.ConfigError(f"{folder} is not a knowledge-base folder: it does not exist; {init}")
    if not folder.is_dir():
        raise fm.ConfigError(
            f"{folder} is a file, not a knowledge-base folder: name one with --kb (or "
            "$FLEXMATCH_KB)"
        )
    if not (folder / fm.CONFIG_FILE).is_file():
        raise fm.ConfigError(
            f"{folder} is not a knowledge-base folder: it has no {fm.CONFIG_FILE}; {init}"
        )
    return folder


AsOption = Annotated[
    str | None,
    typer.Option("--as", help="Search as this user (user:NAME): only what they may read."),
]
GroupOption = Annotated[
    list[str] | None,
    typer.Option("--group", help="A group of the user --as names (repeatable)."),
]


def reader(user: str | None, groups: list[str] | None) -> Principal | None:
    """The ``flexmatch.Principal`` that ``--as``/``--group`` name (None: neither, the
    operator's view of everything); a ``ConfigError`` when malformed."""
    import flexmatch as fm

    if user is None and not groups:
        return None
    if user is not None and not user.startswith("user:"):
        raise fm.ConfigError(f"--as {user[:80]!r} must be 'user:NAME'")
    return fm.Principal.parse(user, groups or [])
