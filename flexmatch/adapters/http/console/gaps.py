"""The gaps page, for admins: what the tenant's users ask that finds nothing good (from
the query log, grouped by meaning), the latest logged queries, and the golden questions
the feedback log makes, to download (the same calls as ``GET /v1/gaps`` and
``GET /v1/query-log/golden``)."""

from __future__ import annotations

from fastapi import Request, Response

from flexmatch import golden_yaml
from flexmatch.adapters.http.console.web import State, User, console_router, need, render

router = console_router()

RECENT = 20  # logged queries shown under the gaps


@router.get("/gaps")
async def gaps_page(request: Request, user: User, state: State) -> Response:
    """The gaps, most asked first, and the latest logged queries."""
    need(user, "admin")
    reader = user.principal.reader
    await state.warmed()
    found = await state.kb.agaps(tenant=user.tenant, principal=reader)
    recent = await state.kb.aquery_log_entries(tenant=user.tenant, principal=reader, limit=RECENT)
    settings = state.kb.config.query_log
    context = {"gaps": found, "recent": recent, "settings": settings}
    return render(request, "gaps.html", context)


@router.get("/gaps/golden.yaml")
async def golden_download(user: User, state: State) -> Response:
    """The golden questions from helpful feedback, as ``flexmatch eval --kb`` reads them."""
    need(user, "admin")
    items = await state.kb.agolden_from_feedback(
        tenant=user.tenant, principal=user.principal.reader
    )
    return Response(
        golden_yaml(items),
        media_type="application/yaml",
        headers={"Content-Disposition": 'attachment; filename="golden.yaml"'},
    )
