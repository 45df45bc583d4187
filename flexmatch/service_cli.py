"""CLI commands for the service interfaces (serve, keys, mcp); registered onto the main app."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the service commands to ``app`` (filled in with the HTTP API and MCP server)."""
