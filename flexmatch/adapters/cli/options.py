"""Options every ``flexmatch`` command shares, defined once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

KbOption = Annotated[
    Path,
    typer.Option(
        "--kb",
        envvar="FLEXMATCH_KB",
        help="Knowledge-base folder ($FLEXMATCH_KB, else here).",
        file_okay=False,
    ),
]
TenantOption = Annotated[str, typer.Option("--tenant", help="Tenant scope.")]
DEFAULT_TENANT = "default"  # the same as flexmatch.DEFAULT_TENANT, without importing it
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
