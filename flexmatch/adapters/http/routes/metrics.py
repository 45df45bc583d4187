"""``GET /metrics``: the process's Prometheus metrics, for an ``admin`` key.

The numbers add up every tenant's traffic, so a key that sees one tenant may not read
them; Prometheus sends the key as the scrape's ``authorization`` credentials.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST

from flexmatch.adapters.http.auth import Principal, require
from flexmatch.adapters.http.state import ServiceState, get_state

router = APIRouter(tags=["metrics"])
Admin = Annotated[Principal, Depends(require("admin"))]


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text."}},
)
async def metrics(_: Admin, state: Annotated[ServiceState, Depends(get_state)]) -> Response:
    """Prometheus metrics of this process (needs an ``admin`` key)."""
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
