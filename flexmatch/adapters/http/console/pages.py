"""Sign-in, overview, documents (list, detail, remove, original) and the search playground.

Every page takes the signed-in key from ``web.current_user`` and reads through the same
calls as the REST API: its route functions where one fits (a document, its original,
removal), the public ``KnowledgeBase`` API otherwise.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Annotated, Any

from fastapi import Query, Request, Response
from starlette.datastructures import Headers

from flexmatch import (
    DocumentRecord,
    FlexMatchError,
    Principal,
    Usage,
    answer_result,
    check_depth,
    check_expand,
)
from flexmatch.adapters.http.auth import check_key, client_host, identify
from flexmatch.adapters.http.console.sessions import (
    COOKIE,
    CSRF_FIELD,
    PATH,
    SIGNIN_COOKIE,
    cookie_name,
    cookie_path,
    new_token,
    same_token,
)
from flexmatch.adapters.http.console.web import (
    State,
    User,
    console_router,
    console_state,
    current_session,
    current_user,
    is_https,
    need,
    posted_form,
    read_cookie,
    redirect,
    render,
    safe_next,
    session_address,
    text_field,
)
from flexmatch.adapters.http.errors import ApiError, status_for
from flexmatch.adapters.http.limits import retry_after
from flexmatch.adapters.http.routes import documents as document_routes
from flexmatch.adapters.http.routes.search import check_text
from flexmatch.adapters.http.state import ServiceState
from flexmatch.service import load_eval

router = console_router()

PAGE_SIZE = 50
CHUNK_PAGE_SIZE = 100
STATUSES = ("complete", "pending", "failed", "removing")
NOTICES = {
    "removed": "The document was removed.",
    "saved": "The prompt was saved.",
}


def set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    """HttpOnly, SameSite=Strict, for the console's paths only; over https Secure and
    ``__Host-`` prefixed (so on every path, as that prefix requires)."""
    secure = is_https(request)
    response.set_cookie(
        cookie_name(name, secure),
        value,
        path=cookie_path(secure),
        httponly=True,
        samesite="strict",
        secure=secure,
    )


def delete_cookie(response: Response, request: Request, name: str) -> None:
    secure = is_https(request)
    response.delete_cookie(
        cookie_name(name, secure), path=cookie_path(secure), secure=secure, httponly=True
    )


# -- signing in and out ----------------------------------------------------------------
def _signin_page(
    request: Request, next_url: str, error: str | None = None, status: int = 200, info: str = ""
) -> Response:
    token = new_token()
    context = {"signin_csrf": token, "next": next_url, "error": error, "info": info}
    response = render(request, "signin.html", context, status=status)
    set_cookie(response, request, SIGNIN_COOKIE, token)
    return response


@router.get("/signin")
async def signin_page(
    request: Request,
    next: str | None = None,
    expired: str | None = None,
    signed_out: str | None = None,
) -> Response:
    if current_session(request) is not None:
        try:
            await current_user(request)
            return redirect(safe_next(next))
        except ApiError:
            pass
    info = ""
    if expired:
        info = "Your session ended because its API key is no longer valid."
    elif signed_out:
        info = "You are signed out."
    return _signin_page(request, safe_next(next), info=info)


SIGNIN_FORM_BYTES = 4_096  # a key, the form's token and where to go next


def _declared_length(request: Request) -> int | None:
    try:
        return int(request.headers.get("content-length", ""))
    except ValueError:
        return None


def _valid_key_text(key: str) -> bool:
    return 0 < len(key) <= 200 and key.isascii() and key.isprintable()


@router.post("/signin")
async def signin(request: Request, state: State) -> Response:
    """Check the key as the API does (failures throttled per address and key id, as
    the API's are); on success a new session and its cookie, ending the old one. Only
    from the console's own origin (``ConsoleRoute`` checks that before this runs).

    An address that has spent its budget may still sign in with a key that exists (see
    ``throttle``), so its form is read, but only a sign-in form's few hundred bytes."""
    client = client_host(request.scope)
    wait = state.throttle.address_wait(client)
    if wait > 0 and not 0 < (_declared_length(request) or 0) <= SIGNIN_FORM_BYTES:
        seconds = retry_after(wait)
        message = f"Too many failed API key checks from this address; retry in {seconds} s."
        page = _signin_page(request, f"{PATH}/", message, status=429)
        page.headers["Retry-After"] = seconds
        return page
    form = await request.form()
    next_url = safe_next(text_field(form, "next"))
    if not same_token(text_field(form, CSRF_FIELD), read_cookie(request, SIGNIN_COOKIE) or ""):
        message = "The sign-in form expired or was not sent from this console; try again."
        return _signin_page(request, next_url, message, status=403)
    key = text_field(form, "api_key").strip()
    if not key:
        return _signin_page(request, next_url, "Enter an API key.", status=422)
    try:
        if _valid_key_text(key):
            await identify(state, Headers({"authorization": f"Bearer {key}"}), client)
        else:  # not a key at all, but a failure all the same
            await check_key(state, key[:200], client)
    except ApiError as exc:
        message = exc.message[:1].upper() + exc.message[1:] + "."  # "API" stays upper case
        if not _valid_key_text(key) and exc.status == 401:
            message = "That is not an API key."
        page = _signin_page(request, next_url, message, status=exc.status)
        page.headers.update(exc.headers or {})
        return page
    sessions = console_state(request).sessions
    sessions.end(read_cookie(request, COOKIE))
    session = sessions.create(key, session_address(request))
    response = redirect(next_url)
    set_cookie(response, request, COOKIE, session.id)
    delete_cookie(response, request, SIGNIN_COOKIE)
    return response


@router.post("/signout")
async def signout(request: Request) -> Response:
    """End the session (its CSRF token required) and clear the cookie."""
    sessions = console_state(request).sessions
    session = current_session(request)
    if session is not None:
        form = await request.form()
        sent = request.headers.get("x-csrf-token") or text_field(form, CSRF_FIELD)
        if not same_token(sent, session.csrf):
            raise ApiError(403, "csrf_failed", "the sign-out form is stale; reload the page")
        sessions.end(session.id)
    response = redirect(f"{PATH}/signin?signed_out=1")
    delete_cookie(response, request, COOKIE)
    return response


# -- overview ----------------------------------------------------------------------------
def _sum_usage(usages: list[Usage]) -> Usage:
    total = Usage()
    for usage in usages:
        total.calls += usage.calls
        total.cached_calls += usage.cached_calls
        total.prompt_tokens += usage.prompt_tokens
        total.completion_tokens += usage.completion_tokens
        total.cost_usd += usage.cost_usd
    return total


@router.get("/")
async def overview(request: Request, user: User, state: State) -> Response:
    """What the tenant holds, what its jobs cost, whether the service is healthy."""
    reader = user.principal.reader  # what this key may read
    stats = state.kb.stats(tenant=user.tenant, principal=reader) if user.can("read") else None
    jobs = await asyncio.to_thread(state.jobs.list, user.tenant)
    readiness = state.readiness
    size = stats.store_bytes if stats is not None else None
    context: dict[str, Any] = {
        "stats": stats,
        "store_bytes": await state.store_bytes_for(user.tenant, user.can("admin"), size),
        "jobs": jobs[:5],
        "job_count": len(jobs),
        "usage": _sum_usage([job.usage for job in jobs]),
        "llm": state.kb.config.models.llm,
        "ready": readiness.store_open and readiness.models_loaded,
        "readiness": readiness,
        "notices": state.kb.notices,
        "evaluation": load_eval(state.kb.path),
    }
    return render(request, "overview.html", context)


# -- documents ---------------------------------------------------------------------------
def _matches(record: DocumentRecord, text: str) -> bool:
    needle = text.casefold()
    return any(needle in value.casefold() for value in (record.title, record.uri, record.id))


def _sources(state: ServiceState, stats_sources: list[str]) -> list[str]:
    return sorted(set(state.kb.config.sources) | set(stats_sources))


@router.get("/documents")
async def documents_page(
    request: Request,
    user: User,
    state: State,
    source: str = "",
    q: str = "",
    status: str = "",
    sort: str = "",
    page: int = 1,
    notice: str = "",
) -> Response:
    """The tenant's documents, filtered by source, text and status, a page at a time."""
    need(user, "read")
    everything = state.kb.list_documents(tenant=user.tenant, principal=user.principal.reader)
    counts: dict[str, int] = {}
    for record in everything:
        counts[record.source] = counts.get(record.source, 0) + 1
    records = [r for r in everything if not source or r.source == source]
    if q.strip():
        records = [r for r in records if _matches(r, q.strip())]
    if status in STATUSES:
        records = [r for r in records if r.status == status]
    if sort == "updated":
        records.sort(key=lambda r: r.updated_at, reverse=True)
    pages = max(1, math.ceil(len(records) / PAGE_SIZE))
    page = min(max(1, page), pages)
    shown = records[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    context = {
        "records": shown,
        "total": len(records),
        "all_total": len(everything),
        "sources": _sources(state, list(counts)),
        "counts": counts,
        "source": source,
        "q": q,
        "status": status if status in STATUSES else "",
        "statuses": STATUSES,
        "sort": "updated" if sort == "updated" else "",
        "page": page,
        "pages": pages,
        "first": (page - 1) * PAGE_SIZE + 1,
        "notice": NOTICES.get(notice, ""),
    }
    return render(request, "documents.html", context)


# Links carry a document's id in the query string (``web.document_url``), so any id leads
# to its own document: in a path, ``a/../b`` is resolved by the browser to ``b`` and
# ``x/remove`` reads as an action on ``x``. The path forms below keep older links working.
DocumentId = Annotated[str, Query(alias="id", min_length=1, description="The document's id.")]


@router.get("/document")
async def document_by_id(
    request: Request, document_id: DocumentId, user: User, state: State, page: int = 1
) -> Response:
    return await document_page(request, document_id, user, state, page)


@router.get("/document/original")
async def original_by_id(
    document_id: DocumentId, user: User, state: State, view: bool = False
) -> Response:
    return await document_original(document_id, user, state, view)


@router.get("/document/remove")
async def remove_page_by_id(
    request: Request, document_id: DocumentId, user: User, state: State
) -> Response:
    return await remove_page(request, document_id, user, state)


@router.post("/document/remove")
async def remove_by_id(
    request: Request, document_id: DocumentId, user: User, state: State
) -> Response:
    return await remove_document(request, document_id, user, state)


@router.get("/documents/{document_id:path}/original")
async def document_original(
    document_id: str, user: User, state: State, view: bool = False
) -> Response:
    """The uploaded file, byte for byte (the API's own download). ``view``: a PDF is shown
    in the browser instead of saved, so a link can open it at a page (``#page=7``); any
    other type is still a download (an uploaded page must not run as the console's)."""
    need(user, "read")
    response = await document_routes.download_original(document_id, user.principal, state)
    if view and response.media_type == "application/pdf":
        disposition = response.headers["Content-Disposition"]
        response.headers["Content-Disposition"] = disposition.replace("attachment", "inline", 1)
    return response


@router.get("/documents/{document_id:path}/remove")
async def remove_page(request: Request, document_id: str, user: User, state: State) -> Response:
    """Ask before removing: the document, its chunks, and a button."""
    need(user, "write")
    detail = await document_routes.get_document(document_id, user.principal, state)
    return render(request, "remove.html", {"record": detail.document})


@router.post("/documents/{document_id:path}/remove")
async def remove_document(request: Request, document_id: str, user: User, state: State) -> Response:
    await posted_form(request, user, "write")
    await document_routes.delete_document(document_id, user.principal, state)
    return redirect(f"{PATH}/documents?notice=removed")


@router.get("/documents/{document_id:path}")
async def document_page(
    request: Request, document_id: str, user: User, state: State, page: int = 1
) -> Response:
    """A document's chunks in order, each with its heading path, text, qualifying text
    and the matching texts that were indexed."""
    need(user, "read")
    detail = await document_routes.get_document(document_id, user.principal, state)
    pages = max(1, math.ceil(len(detail.chunks) / CHUNK_PAGE_SIZE))
    page = min(max(1, page), pages)
    chunks = detail.chunks[(page - 1) * CHUNK_PAGE_SIZE : page * CHUNK_PAGE_SIZE]
    record = detail.document
    context = {
        "record": record,
        "chunks": chunks,
        "chunk_total": len(detail.chunks),
        "page": page,
        "pages": pages,
        "uploaded": record.uri.startswith("upload:") and "#" not in record.uri,
        "question_total": sum(
            1 for c in detail.chunks for m in c.matching_texts if m.kind == "question"
        ),
    }
    return render(request, "document.html", context)


# -- search ------------------------------------------------------------------------------
def parse_filters(text: str, source: str) -> dict[str, Any] | None:
    """``field=value`` lines (a field repeated means any of its values), as ``flexmatch
    query --filter`` takes them; the source select adds ``source``."""
    parsed: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        field, sep, value = line.partition("=")
        if not sep or not field.strip():
            raise ApiError(422, "invalid_filter", f"'{line.strip()}': expected FIELD=VALUE")
        parsed.setdefault(field.strip(), []).append(value.strip())
    if source:
        parsed.setdefault("source", []).append(source)
    if not parsed:
        return None
    return {k: v[0] if len(v) == 1 else v for k, v in parsed.items()}


@router.get("/search")
async def search_page(
    request: Request,
    user: User,
    state: State,
    q: str = "",
    top_n: str = "",
    source: str = "",
    filters: str = "",
    as_user: str = "",
    as_groups: str = "",
    depth: str = "fast",
    expand: str = "none",
    notice: str = "",
) -> Response:
    """The query, its rewritten variants, the results with every signal, and the facts
    block an agent would get: the same search and formatter the API and agents use. An
    admin (or a service key) may search as a user, to check what they would see. A key
    with the ``feedback`` permission marks each result helpful or not. ``depth`` and
    ``expand`` as the API takes them: a deep search shows its cost and each result's hop,
    an expanded one each result's section or neighbours."""
    need(user, "read")
    default_top_n = state.kb.config.query.top_n
    key = user.principal.key
    context: dict[str, Any] = {
        "as_user": as_user,
        "as_groups": as_groups,
        "can_search_as": user.can("admin") or bool(key and key.identity and key.identity.service),
        "q": q,
        "top_n": top_n or str(default_top_n),
        "source": source,
        "filters": filters,
        "sources": sorted(state.kb.config.sources),
        "depth": depth,
        "expand": expand,
        "error": None,
        "result": None,
        "facts": "",
        "took_ms": None,
        "notice": FEEDBACK_NOTICES.get(notice, ""),
        "can_feedback": user.can("feedback"),
        "back": str(request.url.query),
    }
    if not q:
        return render(request, "search.html", context)
    status = 200
    try:
        count = int(top_n) if top_n.strip() else default_top_n
        if not 1 <= count <= 100:
            raise ApiError(422, "validation_error", "top N must be between 1 and 100")
        check_text(state, q)
        searched_depth, mode = check_depth(depth), check_expand(expand)
        conditions = parse_filters(filters, source)
        groups = [g.strip() for g in as_groups.split(",") if g.strip()]
        named = None
        if as_user.strip() or groups:
            if as_user.strip() and not as_user.strip().startswith("user:"):
                raise ApiError(422, "invalid_principal", "search as: 'user:NAME'")
            named = Principal.parse(as_user.strip() or None, groups)
        await state.warmed()
        answer = await state.kb.asearch(
            q,
            top_n=count,
            filters=conditions,
            depth=searched_depth,
            expand=None if mode == "none" else mode,
            tenant=user.tenant,
            principal=user.principal.read_as(named),
        )
        formatting = time.perf_counter()
        context["result"] = answer_result(answer, explain=True)
        context["facts"] = await state.kb.aformat_answer(answer, "markdown")
        format_ms = (time.perf_counter() - formatting) * 1000
        state.metrics.search({**answer.stage_ms, "format": format_ms})
        context["took_ms"] = answer.took_ms
    except ValueError:
        context["error"], status = "top N must be a whole number between 1 and 100", 422
    except ApiError as exc:
        context["error"], status = exc.message, exc.status
    except FlexMatchError as exc:
        context["error"], status = str(exc), status_for(exc)[0]
    return render(request, "search.html", context, status=status)


FEEDBACK_NOTICES = {
    "helpful": "Thanks: the query is now a learned matching text of that chunk.",
    "unhelpful": "Thanks: that chunk moves down for queries like this one.",
}


@router.post("/feedback")
async def feedback(request: Request, user: User, state: State) -> Response:
    """A result marked helpful or not on the search page (the API's ``POST /v1/feedback``
    as this key), then the same search again."""
    form = await posted_form(request, user, "feedback")
    helpful = text_field(form, "helpful") == "1"
    await state.warmed()
    await state.kb.aadd_feedback(
        text_field(form, "q"),
        text_field(form, "chunk_id"),
        helpful,
        tenant=user.tenant,
        principal=user.principal.reader,
    )
    back = text_field(form, "back").partition("&notice=")[0]
    notice = "helpful" if helpful else "unhelpful"
    return redirect(f"{PATH}/search?{back}&notice={notice}")
