"""What every console page shares: templates, the signed-in user, forms and error pages.

Pages and their errors are HTML; the few JSON endpoints under ``/console/api`` (job
progress, prompt previews) answer errors in the API's one JSON shape. Errors are the
API's own: an ``ApiError`` or a ``FlexMatchError`` raised anywhere below a console route
becomes a page with the same status and message.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import jinja2
from fastapi import APIRouter, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.datastructures import FormData, Headers

from flexmatch import FlexMatchError, __version__, describe_access
from flexmatch.adapters.http.auth import Caller, client_host, identify, permits, remember
from flexmatch.adapters.http.console.sessions import (
    COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    PATH,
    Session,
    SessionStore,
    cookie_name,
    same_token,
)
from flexmatch.adapters.http.errors import ApiError, error_response, status_for
from flexmatch.adapters.http.multipart import UploadRoute
from flexmatch.adapters.http.state import ServiceState, get_state
from flexmatch.adapters.http.throttle import client_address
from flexmatch.service import Permission

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
API_PREFIX = f"{PATH}/api/"

# no inline script or style anywhere, nothing from another origin, never in a frame
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class ConsoleUser:
    """The signed-in key: its principal (tenant, permissions) and its session."""

    principal: Caller
    session: Session

    @property
    def tenant(self) -> str:
        return self.principal.tenant

    def can(self, permission: Permission) -> bool:
        return permits(self.principal, permission)

    @property
    def csrf(self) -> str:
        return self.session.csrf


@dataclass
class ConsoleState:
    """What the console keeps between requests (on ``app.state.console``)."""

    sessions: SessionStore = field(default_factory=SessionStore)
    templates: jinja2.Environment = field(default_factory=lambda: make_environment())


def make_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["money"] = money
    env.filters["interval"] = interval
    env.filters["plural"] = plural
    env.filters["num"] = lambda n: f"{n:,}" if isinstance(n, int) else n
    env.filters["size"] = size
    env.filters["score"] = lambda v: "–" if v is None else f"{v:.4f}"
    env.filters["document_url"] = document_url
    env.filters["access"] = describe_access  # who may read a document, in words
    return env


def document_url(document_id: str, action: str = "", **params: Any) -> str:
    """A console link to a document: its id in the query string, so an id such as
    ``a/../b``, ``..`` or ``x/remove`` leads to that very document (in a path, browsers
    resolve dot segments and the routes would read a suffix as an action)."""
    query = urllib.parse.urlencode({"id": document_id, **params}, quote_via=urllib.parse.quote)
    return f"{PATH}/document{'/' + action if action else ''}?{query}"


def when(stamp: str | None) -> str:
    """An ISO time as ``2024-05-01 14:03 UTC`` (what a person reads in a table)."""
    if not stamp:
        return "–"
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def interval(seconds: float) -> str:
    """Seconds as a person reads an interval: ``15 min``, ``6 h``, ``1 d``, ``90 s``."""
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def money(value: float | None) -> str:
    """Dollars, with enough digits that one cheap call does not read as free."""
    if value is None:
        return "–"
    if value == 0:
        return "$0"
    if value < 0.01:
        return f"${value:.6f}".rstrip("0")
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 chunk``, ``2 chunks``, ``1,024 matching texts``."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def size(value: int | None) -> str:
    if value is None:
        return "–"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value} B"


def console_state(request: Request) -> ConsoleState:
    return request.app.state.console


def is_https(request: Request) -> bool:
    return request.url.scheme == "https"


def read_cookie(request: Request, base: str) -> str | None:
    """A console cookie by its base name (``__Host-`` prefixed over https: an unprefixed
    one there may have been tossed in by a sibling subdomain, and is ignored). Over http
    a request carrying the cookie twice gets None: the second was tossed in by another
    page (with a ``Domain`` or another path), and which one is the console's own cannot
    be told (Starlette would keep the last)."""
    name = cookie_name(base, is_https(request))
    if not is_https(request) and _cookie_count(request.headers.getlist("cookie"), name) > 1:
        return None
    return request.cookies.get(name)


def _cookie_count(headers: list[str], name: str) -> int:
    """How often ``name`` appears in the raw ``Cookie`` headers (parsed as Starlette does)."""
    count = 0
    for header in headers:
        for chunk in header.split(";"):
            key = chunk.split("=", 1)[0] if "=" in chunk else ""
            count += key.strip() == name
    return count


def session_address(request: Request) -> str | None:
    """What a session is bound to: over plain http the client's address (as throttled:
    IPv6 by its /64), so a session id tossed in by another page does not work from the
    victim's browser; over https nothing (``__Host-`` cookies cannot be tossed)."""
    return None if is_https(request) else client_address(client_host(request.scope))


def current_session(request: Request) -> Session | None:
    """The live session of this request's cookie, from the address it is bound to."""
    sessions = console_state(request).sessions
    return sessions.get(read_cookie(request, COOKIE), session_address(request))


# -- the signed-in user --------------------------------------------------------------
async def current_user(request: Request) -> ConsoleUser:
    """The session's key, checked as the API checks a key on every request: a revoked
    key ends the session (401), an over-eager one is rate limited (429)."""
    sessions = console_state(request).sessions
    session = current_session(request)
    if session is None:
        raise ApiError(401, "signed_out", "Sign in with an API key to continue.")
    headers = Headers({"authorization": f"Bearer {session.token}"})
    client = client_host(request.scope)
    try:  # checked and throttled at sign-in; checked again, unthrottled, on every page
        principal = await identify(get_state(request), headers, client, throttled=False)
    except ApiError as exc:
        if exc.status == 401:
            sessions.end(session.id)
            message = "The API key of this session is no longer valid; sign in again."
            raise ApiError(401, "signed_out", message) from None
        raise
    remember(request.scope, principal)  # the access log names the tenant
    user = ConsoleUser(principal=principal, session=session)
    request.state.console_user = user
    return user


def need(user: ConsoleUser, permission: Permission) -> None:
    """403, as the API answers, unless the key has ``permission``."""
    if not user.can(permission):
        raise ApiError(
            403, "forbidden", f"this API key does not have the '{permission}' permission"
        )


def check_csrf(user: ConsoleUser, sent: str | None) -> None:
    if not same_token(sent, user.csrf):
        raise ApiError(
            403, "csrf_failed", "the form's security token is missing or stale; reload the page"
        )


async def posted_form(request: Request, user: ConsoleUser, permission: Permission) -> FormData:
    """The form of a POST, after the permission (before any byte of the body is parsed)
    and the CSRF token (a form field, or the X-CSRF-Token header of a script)."""
    need(user, permission)
    header = request.headers.get(CSRF_HEADER)
    if header is not None:
        check_csrf(user, header)
    form = await request.form()
    if header is None:
        field_value = form.get(CSRF_FIELD)
        check_csrf(user, field_value if isinstance(field_value, str) else None)
    return form


def text_field(form: FormData, name: str, default: str = "") -> str:
    value = form.get(name)
    return value if isinstance(value, str) else default


# -- responses ---------------------------------------------------------------------------
def render(
    request: Request,
    template: str,
    context: Mapping[str, Any] | None = None,
    *,
    status: int = 200,
    user: ConsoleUser | None = None,
) -> HTMLResponse:
    user = user or getattr(request.state, "console_user", None)
    page = console_state(request).templates.get_template(template)
    html = page.render(
        user=user,
        csrf=user.csrf if user else "",
        version=__version__,
        path=request.url.path,
        **(context or {}),
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a console path only (never another site)."""
    if (
        value
        and value.startswith(PATH)
        and not value.startswith("//")
        and "\\" not in value
        and not urllib.parse.urlsplit(value).netloc
        and not value.startswith(API_PREFIX)
    ):
        return value
    return f"{PATH}/"


def wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return request.url.path.startswith(API_PREFIX) or (
        "application/json" in accept and "text/html" not in accept
    )


def failure(
    request: Request,
    status: int,
    code: str,
    message: str,
    headers: dict[str, str] | None = None,
) -> Response:
    """An error as the caller can read it: JSON for scripts, a page for people, and the
    sign-in page for someone who is not (or no longer) signed in."""
    if wants_json(request):
        return error_response(status, code, message, headers=headers)
    if status == 401:
        target = request.url.path
        if request.method == "GET" and request.url.query:
            target += "?" + request.url.query
        query = {"next": target} if request.method == "GET" else {}
        if code == "signed_out" and "no longer valid" in message:
            query["expired"] = "1"
        suffix = f"?{urllib.parse.urlencode(query)}" if query else ""
        return redirect(f"{PATH}/signin{suffix}")
    response = render(
        request, "error.html", {"status": status, "code": code, "message": message}, status=status
    )
    response.headers.update(headers or {})
    return response


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SAME_SITE_FETCHES = frozenset({"same-origin", "none"})  # ``none``: the user's own action


def _origin(url: str) -> tuple[str, str, int | None]:
    """``scheme://host[:port]`` as compared: lower case, the scheme's default port made
    explicit (``"null"`` and other non-URLs give an empty scheme, which matches nothing)."""
    parts = urllib.parse.urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        return ("", "", None)
    port = port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return (parts.scheme.lower(), (parts.hostname or "").lower(), port)


def check_origin(request: Request) -> None:
    """Refuse (403) a state-changing request that a page of another origin sent.

    Forms are also protected by their CSRF token, but the sign-in form's token is a
    cookie, and a sibling origin can set (toss) cookies: it could sign a victim into the
    attacker's tenant. Browsers say where a request came from in ``Sec-Fetch-Site``
    (``same-site`` is a sibling subdomain: refused too) and ``Origin``, which must be
    this request's own ``scheme://host``. With neither (an old browser, or no browser),
    a ``Referer`` must be of this origin too; a request with none of the three (not a
    browser) passes on to the token checks. Behind a TLS-terminating proxy, the server
    must see the original scheme and host (uvicorn's ``FORWARDED_ALLOW_IPS``), or every
    form fails.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in SAME_SITE_FETCHES:
        raise ApiError(
            403,
            "cross_origin",
            "the console accepts forms only from its own pages, and the browser says this"
            f" one came from a {site.strip()[:40]} page",
        )
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.url.netloc}"
    if origin is None and site is None:
        referer = request.headers.get("referer")
        if referer is not None and _origin(referer) != _origin(own):
            raise ApiError(
                403,
                "cross_origin",
                f"the console accepts forms only from its own pages ({own}), and the"
                " browser says this one came from another site",
            )
    if origin is not None and _origin(origin) != _origin(own):
        raise ApiError(
            403,
            "cross_origin",
            f"the console accepts forms only from its own pages ({own}), not from"
            f" {origin.strip()[:100]!r}",
        )


class ConsoleRoute(UploadRoute):
    """A route whose errors are pages (or JSON under ``/console/api``), not the API's;
    a state-changing request is refused unless it came from the console's own origin.
    Its forms take long part headers (``multipart``): a long file name fails no import."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                if request.method not in SAFE_METHODS:
                    check_origin(request)  # before a byte of the body is read
                return await handler(request)
            except ApiError as exc:
                return failure(request, exc.status, exc.code, exc.message, exc.headers)
            except FlexMatchError as exc:
                status, code = status_for(exc)
                return failure(request, status, code, str(exc))
            except RequestValidationError as exc:
                first = exc.errors()[0] if exc.errors() else {}
                where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "request"
                message = f"{where}: {first.get('msg', 'invalid request')}"
                return failure(request, 422, "validation_error", message)

        return handle


def service(request: Request) -> ServiceState:
    return get_state(request)


# what every console router module declares: its router and its two dependencies
User = Annotated[ConsoleUser, Depends(current_user)]
State = Annotated[ServiceState, Depends(service)]


def console_router() -> APIRouter:
    """A router of console pages (under ``PATH``, errors as pages, not in the API schema)."""
    return APIRouter(prefix=PATH, route_class=ConsoleRoute, include_in_schema=False)
