"""The FastAPI app: a thin HTTP layer over one open ``KnowledgeBase``.

``create_app`` takes the knowledge base and the limits explicitly (no globals), so tests
build it around a knowledge base they opened, and ``flexmatch serve`` around one it
opened from the command line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from flexmatch import KnowledgeBase, __version__
from flexmatch.adapters.http.access_log import RequestLog
from flexmatch.adapters.http.auth import AuthMiddleware
from flexmatch.adapters.http.console.router import mount as mount_console
from flexmatch.adapters.http.console.sessions import PATH as CONSOLE_PATH
from flexmatch.adapters.http.errors import install_error_handlers
from flexmatch.adapters.http.limits import BodySizeLimitMiddleware, Limits
from flexmatch.adapters.http.routes import (
    documents,
    feedback,
    health,
    jobs,
    keys,
    metrics,
    querylog,
    search,
    sources,
)
from flexmatch.adapters.http.state import ServiceState
from flexmatch.service import SharedState

DESCRIPTION = """\
A question-indexed knowledge base for AI agents.

The web console is at `/console/` (sign in with an API key); `/` leads there.

Every `/v1` call needs an API key (`flexmatch keys create`), sent as
`Authorization: Bearer fm_...` or `X-API-Key`. The key's tenant scopes everything the
call can see or change. Errors are `{"error": {"code": ..., "message": ...}}`.

Prometheus metrics are at `/metrics` (the operator's `service.metrics_token`).
"""


def create_app(
    kb: KnowledgeBase,
    *,
    shared: SharedState | None = None,
    limits: Limits | None = None,
    close_kb: bool = False,
) -> FastAPI:
    """The HTTP API over ``kb``. Keys, jobs and cache generations are in ``shared``: by
    default the database at ``service.state_url``, or ``<kb>/.flexmatch/keys.sqlite``.
    ``close_kb``: the app owns ``kb`` and closes it when it stops (a worker process)."""
    limits = limits or Limits()
    own = shared is None
    shared = shared or SharedState.for_kb(kb.path, kb.config)
    state = ServiceState.build(kb, shared, limits)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.start()
        try:
            yield
        finally:
            await state.close()
            if own:
                shared.close()
            if close_kb:
                kb.close()

    app = FastAPI(
        title="FlexMatch",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.service = state
    install_error_handlers(app)
    routers = (health, documents, jobs, sources, search, feedback, querylog, keys, metrics)
    for module in routers:
        app.include_router(module.router)
    mount_console(app)  # the web console, under /console

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        """A person who opens the server's address finds the console."""
        return RedirectResponse(f"{CONSOLE_PATH}/", status_code=307)

    # the last added runs first: the access log and request metrics (which see every
    # answer, refusals too), the size cap, then the key, then the routes
    app.add_middleware(AuthMiddleware, state=state)
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=limits.max_body_bytes)
    app.add_middleware(RequestLog, metrics=state.metrics, routes=app.router.routes)
    return app
