"""The access log and the request metrics: one measurement per HTTP request.

``RequestLog`` is the outermost middleware, so what it sees is what the client got:
a request refused for its size or its key is logged and counted like any other. Each
request is named by its route *template* (``/v1/documents/{document_id}``), never its
raw path: the log holds no document ids, query strings or keys, and the metrics keep a
bounded number of series. The line says the method, route, status, duration, the
tenant of the key (``-`` when there was none) and the client's address.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from starlette.routing import BaseRoute, Mount, compile_path, get_route_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flexmatch.adapters.http.auth import client_host, principal_in
from flexmatch.adapters.http.metrics import UNMATCHED, Metrics

access_log = logging.getLogger("flexmatch.http.access")
# any other method a client makes up is "other": a label value per made-up method would
# let one client grow the metrics without bound
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


@dataclass(frozen=True)
class RouteTemplate:
    """One route's path template, the pattern it matches and its methods (None: any)."""

    path: str
    pattern: re.Pattern[str]
    methods: frozenset[str] | None


def route_templates(routes: Sequence[BaseRoute]) -> list[RouteTemplate]:
    """Every route of the app, in the order the router tries them (routers included in
    it flattened, a mount as ``/prefix/{path:path}``)."""
    table = []
    for path, route in _flat(routes):
        if isinstance(route, Mount):
            path = path.rstrip("/") + "/{path:path}"
        methods = getattr(route, "methods", None)
        table.append(
            RouteTemplate(path, compile_path(path)[0], frozenset(methods) if methods else None)
        )
    return table


def _flat(routes: Sequence[BaseRoute]) -> Iterator[tuple[str, BaseRoute]]:
    try:  # newer FastAPI versions keep an included router as one entry
        from fastapi.routing import iter_route_contexts
    except ImportError:  # earlier ones copy its routes into the app's list
        yield from ((str(getattr(r, "path", "")), r) for r in routes)
        return
    for context in iter_route_contexts(routes):
        yield str(context.path or ""), context.original_route


def route_template(table: Sequence[RouteTemplate], scope: Scope) -> str:
    """The template of the route that answers ``scope``: the first whose path and method
    match, else the first whose path matches (a 405), else ``UNMATCHED``."""
    path, method = get_route_path(scope), scope.get("method", "")
    partial = None
    for route in table:
        if route.pattern.match(path):
            if route.methods is None or method in route.methods:
                return route.path
            partial = partial or route.path
    return partial or UNMATCHED


class RequestLog:
    """Time every HTTP request, count it in ``metrics`` and write its access-log line."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = route_templates(routes)  # the stack is built once every route is in

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what a client sees when the app fails before it starts a response

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            self._record(scope, status, seconds)

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        method = str(scope.get("method", ""))
        method = method if method in METHODS else "other"
        route = route_template(self.routes, scope)
        self.metrics.request(method, route, status, seconds)
        principal = principal_in(scope)
        tenant = principal.tenant if principal is not None else "-"
        client = client_host(scope) or "-"
        duration_ms = round(seconds * 1000, 1)
        access_log.info(
            "%s %s %d %.1f ms tenant=%s client=%s",
            method,
            route,
            status,
            duration_ms,
            tenant,
            client,
            extra={
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": duration_ms,
                "tenant": tenant,
                "client": client,
            },
        )
