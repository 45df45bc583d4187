"""One JSON error shape for every failure the HTTP API returns.

``{"error": {"code": "not_found", "message": "..."}}``, with a stable ``code`` clients
can branch on, for our own errors, FastAPI's validation errors, unknown routes and
unexpected crashes alike; a traceback never reaches the client.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from flexmatch import FlexMatchError

log = logging.getLogger("flexmatch.adapters.http")

# the default code for each status, when nothing more specific applies
STATUS_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    500: "internal_error",
    502: "upstream_error",
    503: "unavailable",
}


class ApiError(Exception):
    """An error with its HTTP status, stable code, message and optional headers."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        self.details = details


def error_body(code: str, message: str, details: list[dict[str, Any]] | None = None) -> dict:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    return {"error": error}


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    details: list[dict[str, Any]] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(code, message, details), status_code=status, headers=headers)


def not_found(what: str, ident: str) -> ApiError:
    """The one answer for an id outside the caller's tenant, whether or not it exists."""
    return ApiError(404, "not_found", f"no {what} '{ident}'")


def _query_names(dependant: Any) -> set[str]:
    names = {str(getattr(p, "alias", p.name)) for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


async def reject_unknown_query(request: Request) -> None:
    """A query parameter the endpoint does not take is refused, not silently ignored
    (``limit`` on a search would otherwise quietly return the default number)."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    known = _query_names(dependant)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        takes = ", ".join(sorted(known)) or "none"
        raise ApiError(
            422,
            "unknown_parameter",
            f"unknown query parameter {unknown[0]!r} (this endpoint takes: {takes})",
        )


def status_for(exc: FlexMatchError) -> tuple[int, str]:
    """Status and code for an error the core raised on purpose (its message is user-facing):
    those its class carries (``flexmatch.errors``)."""
    status = exc.status if exc.status >= 400 else 500  # a client's own error, re-raised
    return status, exc.code


def _validation_details(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Where and what, without echoing the submitted values back."""
    return [
        {
            "loc": [str(part) for part in err.get("loc", ())],
            "message": str(err.get("msg", "")),
            "type": str(err.get("type", "")),
        }
        for err in exc.errors()
    ]


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception type the app can meet to the one JSON shape."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(
            exc.status, exc.code, exc.message, headers=exc.headers, details=exc.details
        )

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = STATUS_CODES.get(exc.status_code, "error")
        if exc.status_code == 404:
            message = "no such route"
        elif isinstance(exc.detail, str) and exc.detail:
            message = exc.detail
        else:
            message = code.replace("_", " ")
        return error_response(exc.status_code, code, message, headers=exc.headers)

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        details = _validation_details(exc)
        first = details[0] if details else {"loc": [], "message": "invalid request"}
        where = ".".join(first["loc"][1:] or first["loc"]) or "request"
        message = f"{where}: {first['message']}"
        return error_response(422, "validation_error", message, details=details)

    async def flexmatch_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, FlexMatchError)
        status, code = status_for(exc)
        if status >= 500:
            log.warning("request failed: %r", str(exc))
        return error_response(status, code, str(exc))

    async def crash(_: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error", exc_info=exc)
        return error_response(500, "internal_error", "internal server error (see the server log)")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(FlexMatchError, flexmatch_error)
    app.add_exception_handler(Exception, crash)
