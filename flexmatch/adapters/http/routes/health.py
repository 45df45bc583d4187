"""Liveness and readiness probes; no key needed, nothing about any tenant revealed.

Ready means every request could be served: the store answers, the embedding model is
loaded, and the state database (keys, jobs; shared by replicas) answers. A replica whose
state database is down says so here, so a load balancer sends its traffic elsewhere.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from flexmatch import FlexMatchError
from flexmatch.adapters.http.errors import error_body
from flexmatch.adapters.http.schemas import Health
from flexmatch.adapters.http.state import ServiceState, get_state

router = APIRouter(tags=["health"])

State = Annotated[ServiceState, Depends(get_state)]
STATE_PROBE_TIMEOUT = 8.0  # seconds; above the state database's own connect timeout


async def _probe_state(state: ServiceState) -> str | None:
    """Why the state database cannot be used now, or None when it answers."""
    try:
        await asyncio.wait_for(asyncio.to_thread(state.shared.ping), STATE_PROBE_TIMEOUT)
    except TimeoutError:
        return (
            f"the service state database ({state.shared.location}) did not answer "
            f"within {STATE_PROBE_TIMEOUT:g} s"
        )
    except FlexMatchError as exc:
        return str(exc)
    return None


@router.get("/health", response_model=Health)
async def live() -> Health:
    """The process answers."""
    return Health(status="ok")


@router.get(
    "/health/ready",
    response_model=Health,
    responses={
        503: {"description": "Still loading, or the store or the state database does not answer."}
    },
)
async def ready(state: State) -> Health | JSONResponse:
    """The store answers, the embedding model is loaded and the state database answers."""
    readiness = state.readiness
    store = await asyncio.to_thread(state.probe_store)  # never block the loop on a lock
    state_error = await _probe_state(state)
    checks = {"store": store, "models": readiness.models_loaded, "state": state_error is None}
    if all(checks.values()):
        return Health(status="ready", checks=checks)
    message = readiness.error or state_error or "starting: the embedding model is loading"
    return JSONResponse({**error_body("not_ready", message), "checks": checks}, status_code=503)
