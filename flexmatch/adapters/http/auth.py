"""Who is calling: the API key gives the tenant and the permissions, and nothing else does.

Every route that touches data depends on ``require(permission)``, which returns the
caller's ``Caller``; routes read the tenant from it and accept no tenant from the
request, so a scoped key cannot even express a query outside its scope.

The key is checked by a middleware for every ``/v1`` request before any body is read,
so an unauthenticated or rate-limited client cannot make the server parse an upload.
Order of checks: missing key → 401, too many failed checks from this address or on
this key id → 429 (``throttle``), bad key → 401, over the rate → 429, not permitted → 403.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from flexmatch import FlexMatchError, KeyRequestError, Principal, named_principal
from flexmatch.adapters.http.errors import ApiError, error_response, status_for
from flexmatch.adapters.http.limits import retry_after
from flexmatch.adapters.http.state import ServiceState, get_state
from flexmatch.service import ApiKey, Permission, grants

PROTECTED_PREFIX = "/v1/"
_PRINCIPAL = "flexmatch.principal"

# declared for the OpenAPI schema; the middleware below does the checking
_bearer = HTTPBearer(
    auto_error=False,
    description="An API key from `flexmatch keys create`, as `Authorization: Bearer fm_...`.",
)
_header = APIKeyHeader(
    name="X-API-Key", auto_error=False, description="The same API key, in a header."
)


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: the key, the one tenant it may see, who it reads
    documents as (``reader``; None: every document, an admin key naming nobody) and who
    it writes as (``writer``, ``ApiKey.writer``; None: an admin key)."""

    key_id: str
    tenant: str
    permissions: frozenset[str]
    reader: Principal | None = None
    key: ApiKey | None = None
    writer: Principal | None = None

    def read_as(self, named: Principal | None) -> Principal | None:
        """Who a request naming ``named`` in its body reads as (see ``ApiKey.reader``);
        a 403 when this key may not name it."""
        if named is None or self.key is None:
            return self.reader
        return _reader(self.key, named)


def named_reader(headers: Headers) -> Principal | None:
    """The end user the request names (``X-FlexMatch-Principal: user:alice`` and
    ``X-FlexMatch-Groups: eng, hr``), or None; a 422 when they are malformed."""
    try:
        return named_principal(headers.get)
    except FlexMatchError as exc:
        raise ApiError(422, "invalid_principal", str(exc)) from None


def _reader(key: ApiKey, named: Principal | None) -> Principal | None:
    try:
        return key.reader(named)
    except KeyRequestError as exc:
        raise ApiError(403, "forbidden", str(exc)) from None


async def identify(
    state: ServiceState, headers: Headers, client: str, *, throttled: bool = True
) -> Caller:
    """The caller behind the request's key, after its rate limit; raises 401 or 429.

    ``client`` is the caller's address: failed checks from it are throttled (see
    ``throttle``). ``throttled=False`` is only for a key already checked at sign-in (a
    console session), which is checked again but never throttled.
    """
    authorization = headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    token = credentials.strip() if scheme.lower() == "bearer" else ""
    token = token or headers.get("x-api-key", "").strip()
    challenge = {"WWW-Authenticate": "Bearer"}
    if not token:
        raise ApiError(
            401,
            "unauthorized",
            "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
            headers=challenge,
        )
    key = await check_key(state, token, client, throttled=throttled)
    wait = state.limiter.acquire(key.id)
    if wait > 0:
        raise ApiError(
            429,
            "rate_limited",
            "too many requests for this API key; retry later",
            headers={"Retry-After": retry_after(wait)},
        )
    named = named_reader(headers)
    reader = _reader(key, named)
    return Caller(
        key_id=key.id,
        tenant=key.tenant,
        permissions=frozenset(key.permissions),
        reader=reader,
        key=key,
        writer=key.writer(named),
    )


async def check_key(
    state: ServiceState, token: str, client: str, *, throttled: bool = True
) -> ApiKey:
    """The key behind ``token``, throttled by failures from ``client`` and on its key id.

    The key store is read on ``state.key_checks``' threads, not on the event loop (a
    database read each); ``Throttle.admit`` takes the failure before, so checks that
    run at the same time cannot overspend a budget."""
    loop = asyncio.get_running_loop()
    throttle = state.throttle
    if not throttled:
        key = await loop.run_in_executor(state.key_checks, state.keys.verify, token)
        if key is None:
            raise _invalid()
        return key
    if throttle.needs_known_ids(token):
        await loop.run_in_executor(state.key_checks, throttle.known.refresh)
    admission = throttle.admit(client, token)
    if admission.wait > 0:
        raise _throttled(admission.reason, admission.wait)
    try:
        key = await loop.run_in_executor(state.key_checks, state.keys.verify, token)
    except BaseException:  # the key store failed, or the client went away: no failure
        throttle.release(admission)
        raise
    if key is None:
        wait = throttle.failed(admission)
        if wait > 0:
            reason = (
                "too many failed checks of this API key id"
                if admission.attacked
                else "too many failed API key checks from this address"
            )
            raise _throttled(reason, wait)
        raise _invalid()
    throttle.succeeded(admission)
    return key


def _invalid() -> ApiError:
    message = "the API key is not valid or was revoked"
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


def _throttled(reason: str, wait: float) -> ApiError:
    seconds = retry_after(wait)
    return ApiError(
        429, "rate_limited", f"{reason}; retry in {seconds} s", headers={"Retry-After": seconds}
    )


def client_host(scope: Scope) -> str:
    """The caller's address as the server sees it ("" when it is not known)."""
    client = scope.get("client")
    return str(client[0]) if client else ""


def remember(scope: Scope, principal: Caller) -> None:
    """Keep the caller on the request (the routes and the access log read it there)."""
    scope.setdefault("state", {})[_PRINCIPAL] = principal


def principal_in(scope: Scope) -> Caller | None:
    """The caller a key check found for this request, if one did."""
    principal = scope.get("state", {}).get(_PRINCIPAL)
    return principal if isinstance(principal, Caller) else None


class AuthMiddleware:
    """Authenticate every ``/v1`` request up front and hand the ``Caller`` to the route."""

    def __init__(self, app: ASGIApp, state: ServiceState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PROTECTED_PREFIX):
            try:
                principal = await identify(self.state, Headers(scope=scope), client_host(scope))
            except ApiError as exc:
                response = error_response(exc.status, exc.code, exc.message, headers=exc.headers)
                await response(scope, receive, send)
                return
            except FlexMatchError as exc:  # the key store failed (its database is down)
                status, code = status_for(exc)
                await error_response(status, code, str(exc))(scope, receive, send)
                return
            remember(scope, principal)
        await self.app(scope, receive, send)


async def authenticate(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> Caller:
    """The principal the middleware found (or, without the middleware, check now)."""
    principal = principal_in(request.scope)
    if principal is None:
        principal = await identify(get_state(request), request.headers, client_host(request.scope))
        remember(request.scope, principal)
    return principal


def permits(principal: Caller, *permissions: Permission) -> bool:
    """Whether the caller's key has one of ``permissions`` (``admin`` has all)."""
    return grants(principal.permissions, *permissions)


def require(*permissions: Permission) -> Callable[..., Awaitable[Caller]]:
    """A dependency: the caller, if its key has one of ``permissions`` (``admin`` has all)."""

    async def check(principal: Annotated[Caller, Depends(authenticate)]) -> Caller:
        if not permits(principal, *permissions):
            wanted = "' or '".join(permissions)
            raise ApiError(
                403, "forbidden", f"this API key does not have the '{wanted}' permission"
            )
        return principal

    return check
