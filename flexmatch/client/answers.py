"""The server's answers read back: a success parsed into the model the embedded call
returns, an error answer raised as the ``FlexMatchError`` the embedded call would raise
(with the server's message)."""

from __future__ import annotations

import urllib.parse
from typing import Any, TypeVar

import httpx
from pydantic import TypeAdapter, ValidationError

from flexmatch.errors import (
    ConfigError,
    DocumentNotFoundError,
    FlexMatchError,
    ServiceError,
    by_code,
)
from flexmatch.models import Job, SearchResult

T = TypeVar("T")

RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
JOBS: TypeAdapter[list[Job]] = TypeAdapter(list[Job])


def error_for(
    status: int, code: str, message: str, missing: type[FlexMatchError] | None = None
) -> FlexMatchError:
    """The ``FlexMatchError`` for an error answer: the class that carries its code
    (``flexmatch.errors.by_code``), as the embedded call raises it; a 404 is the
    ``missing`` class the call names (e.g. ``DocumentNotFoundError``; a job or key not
    found has none). What no class names is a ``ServiceError`` with the status."""
    if code == DocumentNotFoundError.code:
        if status == 404 and missing is not None:
            return missing(message)
        return ServiceError(status, code, message)
    kind = by_code().get(code)
    if kind is not None and kind not in (FlexMatchError, ServiceError):
        return kind.from_answer(code, message)
    if status == 422:  # a request the server's rules refuse (too many items, bad principal)
        return ConfigError(message)
    return ServiceError(status, code, message)


def answer_error(response: httpx.Response, missing: type[FlexMatchError] | None) -> FlexMatchError:
    """The error an answer that is not a success stands for."""
    try:
        body = response.json()["error"]
        code, message = str(body["code"]), str(body["message"])
    except (ValueError, KeyError, TypeError):
        reason = response.reason_phrase or "error"
        code = "http_error"
        message = f"{response.request.url} answered HTTP {response.status_code} {reason}"
    return error_for(response.status_code, code, message, missing)


def parsed(response: httpx.Response, model: type[T] | TypeAdapter[T]) -> T:
    adapter = model if isinstance(model, TypeAdapter) else TypeAdapter(model)
    try:
        return adapter.validate_json(response.content)
    except ValidationError as exc:
        raise ServiceError(
            response.status_code,
            "unexpected_answer",
            f"{response.request.url} answered something that is not a FlexMatch response "
            f"({exc.error_count()} problem(s), first: {exc.errors()[0]['msg']}); "
            "is the URL that of a flexmatch serve?",
        ) from None


def search_result(item: dict[str, Any]) -> SearchResult:
    """A result of the tool result as the ``SearchResult`` the embedded query returns
    (its explanation is its signals; fields added to both later carry over)."""
    data = {k: v for k, v in item.items() if k not in ("rank", "explanation")}
    data["signals"] = item.get("explanation") or {}
    return SearchResult.model_validate(data)


def attachment_name(response: httpx.Response, fallback: str) -> str:
    """The file name an attachment answer gives (``filename*=UTF-8''...`` or
    ``filename="..."``), else ``fallback``."""
    disposition = response.headers.get("Content-Disposition", "")
    for part in disposition.split(";"):
        key, _, value = part.strip().partition("=")
        if key.lower() == "filename*" and value.lower().startswith("utf-8''"):
            return urllib.parse.unquote(value[7:])
        if key.lower() == "filename" and value:
            return value.strip('"')
    return fallback
