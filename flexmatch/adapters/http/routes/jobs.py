"""Ingest jobs of the caller's tenant: progress, per-document outcomes and errors."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends

from flexmatch import Job
from flexmatch.adapters.http.auth import Principal, require
from flexmatch.adapters.http.errors import not_found, reject_unknown_query
from flexmatch.adapters.http.state import ServiceState, get_state

router = APIRouter(prefix="/v1", tags=["jobs"], dependencies=[Depends(reject_unknown_query)])

# whoever may start a job may follow it
Caller = Annotated[Principal, Depends(require("read", "write"))]
State = Annotated[ServiceState, Depends(get_state)]


@router.get("/jobs", response_model=list[Job])
async def list_jobs(principal: Caller, state: State) -> list[Job]:
    """The tenant's jobs, newest first (finished ones are kept for a while)."""
    return await asyncio.to_thread(state.jobs.list, principal.tenant)


@router.get("/jobs/{job_id}", response_model=Job)
async def get_job(job_id: str, principal: Caller, state: State) -> Job:
    """A job's status, progress counts, and the outcome of each document so far."""
    job = await asyncio.to_thread(state.jobs.get, principal.tenant, job_id)
    if job is None:
        raise not_found("job", job_id)
    return job
