"""The query log of the caller's tenant, for admin keys: the logged queries and
feedback, the gaps (what finds nothing good, grouped by meaning) and the golden
questions the feedback makes. An admin key that names a principal
(``X-FlexMatch-Principal``) sees what that principal may read, and nothing else."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from flexmatch import FeedbackEvent, Gap, LogEntry, golden_yaml
from flexmatch.adapters.http.auth import Caller, require
from flexmatch.adapters.http.errors import reject_unknown_query
from flexmatch.adapters.http.state import ServiceState, get_state

router = APIRouter(prefix="/v1", tags=["query log"], dependencies=[Depends(reject_unknown_query)])

Admin = Annotated[Caller, Depends(require("admin"))]
State = Annotated[ServiceState, Depends(get_state)]


@router.get("/query-log", response_model=list[LogEntry])
async def query_log(
    caller: Admin, state: State, limit: Annotated[int, Query(ge=1, le=10_000)] = 100
) -> list[LogEntry]:
    """The tenant's logged queries, newest first, with the results the reader may read."""
    return await state.kb.aquery_log_entries(
        tenant=caller.tenant, principal=caller.reader, limit=limit
    )


@router.get("/query-log/feedback", response_model=list[FeedbackEvent])
async def query_feedback(caller: Admin, state: State) -> list[FeedbackEvent]:
    """The tenant's feedback events on documents the reader may read, newest first."""
    return await state.kb.aquery_feedback(tenant=caller.tenant, principal=caller.reader)


@router.get("/gaps", response_model=list[Gap])
async def gaps(
    caller: Admin, state: State, limit: Annotated[int, Query(ge=1, le=1_000)] = 50
) -> list[Gap]:
    """What people ask that finds nothing good, or marked unhelpful, grouped by meaning,
    the most asked first."""
    await state.warmed()
    found = await state.kb.agaps(tenant=caller.tenant, principal=caller.reader)
    return found[:limit]


@router.get("/query-log/golden", response_class=Response)
async def golden(caller: Admin, state: State) -> Response:
    """The golden questions the feedback log makes, as the YAML ``flexmatch eval --kb``
    reads."""
    items = await state.kb.agolden_from_feedback(tenant=caller.tenant, principal=caller.reader)
    return Response(golden_yaml(items), media_type="application/yaml")
