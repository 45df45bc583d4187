"""Ingest jobs of the caller's tenant: progress, per-document outcomes and errors."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends

from flexmatch import Job
from flexmatch.adapters.http.auth import Caller, permits, require
from flexmatch.adapters.http.errors import not_found, reject_unknown_query
from flexmatch.adapters.http.jobs import owner_of, visible
from flexmatch.adapters.http.state import ServiceState, get_state

router = APIRouter(prefix="/v1", tags=["jobs"], dependencies=[Depends(reject_unknown_query)])

# whoever may start a job may follow it
Follower = Annotated[Caller, Depends(require("read", "write"))]
State = Annotated[ServiceState, Depends(get_state)]


def follower(principal: Caller) -> str | None:
    """Whose jobs the caller sees: every job of the tenant for an admin key (None), else
    the jobs it started, as the end user it acts for (docs/security.md, "Access
    control"): a job's outcomes name files and documents its starter wrote."""
    return None if permits(principal, "admin") else owner_of(principal.key_id, principal.reader)


@router.get("/jobs", response_model=list[Job])
async def list_jobs(principal: Follower, state: State) -> list[Job]:
    """The caller's jobs (an admin key's: the tenant's), newest first (finished ones are
    kept for a while)."""
    jobs = await asyncio.to_thread(state.jobs.list, principal.tenant)
    return [job for job in jobs if visible(job, follower(principal))]


@router.get("/jobs/{job_id}", response_model=Job)
async def get_job(job_id: str, principal: Follower, state: State) -> Job:
    """A job's status, progress counts, and the outcome of each document so far; another
    key's job is not found, like one that does not exist."""
    job = await asyncio.to_thread(state.jobs.get, principal.tenant, job_id)
    if job is None or not visible(job, follower(principal)):
        raise not_found("job", job_id)
    return job
