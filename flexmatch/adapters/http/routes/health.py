"""Liveness and readiness probes; no key needed, nothing about any tenant revealed."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from flexmatch.adapters.http.errors import error_body
from flexmatch.adapters.http.schemas import Health
from flexmatch.adapters.http.state import ServiceState, get_state

router = APIRouter(tags=["health"])

State = Annotated[ServiceState, Depends(get_state)]


@router.get("/health", response_model=Health)
async def live() -> Health:
    """The process answers."""
    return Health(status="ok")


@router.get(
    "/health/ready",
    response_model=Health,
    responses={503: {"description": "Still loading, or the store does not answer."}},
)
async def ready(state: State) -> Health | JSONResponse:
    """The store answers and the embedding model is loaded."""
    readiness = state.readiness
    store = await asyncio.to_thread(state.probe_store)  # never block the loop on a lock
    checks = {"store": store, "models": readiness.models_loaded}
    if all(checks.values()):
        return Health(status="ready", checks=checks)
    message = readiness.error or "starting: the embedding model is loading"
    return JSONResponse({**error_body("not_ready", message), "checks": checks}, status_code=503)
