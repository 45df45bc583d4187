"""``flexmatch serve``: the HTTP API's command, added to the CLI through the
``flexmatch.commands`` hook like any plug-in's (``flexmatch.plugins``).

FastAPI and uvicorn are imported only when the command runs, so every CLI start, which
adds it, stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from flexmatch import MAX_QUERY_CHARS
from flexmatch.adapters.command_line import (
    HostOption,
    KbOption,
    PortOption,
    kb_folder,
)
from flexmatch.service import require_extra


def serve(
    kb: KbOption = Path("."),
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    max_body_mb: Annotated[
        float, typer.Option(min=0.001, help="Largest request body (uploads), in MB.")
    ] = 64.0,
    max_query_chars: Annotated[int, typer.Option(min=1, help="Longest query.")] = MAX_QUERY_CHARS,
    rate: Annotated[
        float, typer.Option(min=0, help="Requests per second per API key (0: no limit).")
    ] = 10.0,
    burst: Annotated[int, typer.Option(min=1, help="Requests a key may make at once.")] = 30,
    log_level: Annotated[
        str, typer.Option(help="Log level: debug, info (an access-log line per request), warning.")
    ] = "info",
    log_format: Annotated[
        str,
        typer.Option(
            envvar="FLEXMATCH_LOG_FORMAT",
            help="text (for a terminal) or json (one object per line, for a log collector); "
            "also FLEXMATCH_LOG_FORMAT.",
        ),
    ] = "text",
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            max=64,
            help="Server processes; more than one needs store.url (a Qdrant server).",
        ),
    ] = 1,
) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json, docs at /docs)."""
    require_extra("fastapi", "server", "flexmatch serve")
    from flexmatch.adapters.http.limits import Limits
    from flexmatch.adapters.http.server import serve as run_server

    if log_format not in ("text", "json"):
        raise typer.BadParameter("use text or json", param_hint="--log-format")
    chosen_format: Literal["text", "json"] = "json" if log_format == "json" else "text"
    limits = Limits(
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        max_query_chars=max_query_chars,
        rate_per_second=rate,
        burst=burst,
    )
    run_server(
        kb_folder(kb),
        host=host,
        port=port,
        limits=limits,
        log_level=log_level,
        log_format=chosen_format,
        workers=workers,
    )


def add_commands(app: typer.Typer) -> None:
    """The ``flexmatch.commands`` entry point ``serve``."""
    app.command()(serve)
