"""The console put together: its pages, its static files, and a page for unknown paths."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.staticfiles import StaticFiles

from flexmatch.adapters.http.console import chains, gaps, imports, pages, sources
from flexmatch.adapters.http.console.sessions import PATH
from flexmatch.adapters.http.console.web import STATIC, ConsoleRoute, ConsoleState, failure

fallback = APIRouter(prefix=PATH, route_class=ConsoleRoute, include_in_schema=False)


@fallback.get("/{rest:path}")
async def unknown(request: Request, rest: str) -> Response:
    return failure(request, 404, "not_found", "There is no console page at this address.")


def mount(app: FastAPI, state: ConsoleState | None = None) -> None:
    """Serve the console under ``/console`` on ``app`` (the API's app)."""
    app.state.console = state or ConsoleState()
    for module in (pages, imports, chains, sources, gaps):
        app.include_router(module.router)
    app.mount(f"{PATH}/static", StaticFiles(directory=STATIC), name="console-static")
    app.include_router(fallback)  # last: after every page and the static files
