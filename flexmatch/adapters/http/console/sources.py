"""The sources page: each source's sync schedule, its last run (outcome, counts, cost)
and next run for the tenant, and a "Sync now" button that starts the API's sync job
(``POST /v1/sources/{name}/sync``, the same lease and the same 409 while it runs)."""

from __future__ import annotations

import asyncio
import urllib.parse

from fastapi import Request, Response

from flexmatch.adapters.http.console.sessions import PATH
from flexmatch.adapters.http.console.web import (
    State,
    User,
    console_router,
    need,
    posted_form,
    redirect,
    render,
    text_field,
)
from flexmatch.adapters.http.errors import ApiError, not_found
from flexmatch.adapters.http.jobs import owner_of

router = console_router()

NOTICES = {
    "started": "The sync started; this page shows its result when it ends.",
    "running": "That source is already syncing (here or on another server).",
}


@router.get("/sources")
async def sources_page(request: Request, user: User, state: State, notice: str = "") -> Response:
    """Every source with its schedule, last and next sync; admins may sync one now."""
    need(user, "read")
    statuses = await asyncio.to_thread(state.scheduler.statuses, user.tenant)
    context = {"sources": statuses, "notice": NOTICES.get(notice, "")}
    return render(request, "sources.html", context)


@router.post("/sources/sync")
async def sync_now(request: Request, user: User, state: State) -> Response:
    """Start the source's sync for the tenant and come back to the sources page."""
    form = await posted_form(request, user, "admin")
    source = text_field(form, "source")
    if source not in state.kb.config.sources:
        raise not_found("source", source)
    owner = owner_of(user.principal.key_id, user.principal.reader)
    try:
        await state.scheduler.run(source, user.tenant, "request", owner=owner)
    except ApiError as exc:
        if exc.status != 409:
            raise
        notice = "running"
    else:
        notice = "started"
    return redirect(f"{PATH}/sources?{urllib.parse.urlencode({'notice': notice})}")
