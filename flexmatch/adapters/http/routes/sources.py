"""Sources: each one's schedule, last and next sync for the caller's tenant; sync now."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Response

from flexmatch.adapters.http.auth import Caller, require
from flexmatch.adapters.http.errors import not_found, reject_unknown_query
from flexmatch.adapters.http.jobs import owner_of
from flexmatch.adapters.http.schemas import JobAccepted, SourceStatus
from flexmatch.adapters.http.state import ServiceState, get_state

router = APIRouter(prefix="/v1", tags=["sources"], dependencies=[Depends(reject_unknown_query)])

Reader = Annotated[Caller, Depends(require("read"))]
Admin = Annotated[Caller, Depends(require("admin"))]
State = Annotated[ServiceState, Depends(get_state)]


@router.get("/sources", response_model=list[SourceStatus])
async def list_sources(principal: Reader, state: State) -> list[SourceStatus]:
    """Every source in the config: its sync schedule, its last sync for this tenant
    (outcome, counts, LLM cost), its next scheduled sync and whether one runs now on any
    replica."""
    return await asyncio.to_thread(state.scheduler.statuses, principal.tenant)


@router.post(
    "/sources/{name}/sync",
    status_code=202,
    response_model=JobAccepted,
    responses={409: {"description": "A sync of this source runs already (on any replica)."}},
)
async def sync_now(name: str, principal: Admin, state: State, response: Response) -> JobAccepted:
    """Sync the source for this tenant now, as a job of kind ``sync``: it lists the
    source, ingests what is new or changed and removes what is gone (when its listing is
    whole). 409 ``sync_running`` while a sync of it runs anywhere."""
    if name not in state.kb.config.sources:
        raise not_found("source", name)
    owner = owner_of(principal.key_id, principal.reader)
    job = await state.scheduler.run(name, principal.tenant, "request", owner=owner)
    url = f"/v1/jobs/{job.id}"
    response.headers["Location"] = url
    return JobAccepted(job_id=job.id, status=job.status, total=job.total, url=url)
