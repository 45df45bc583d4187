"""``GET /metrics``: the process's Prometheus metrics, for the operator.

The numbers add up every tenant's traffic, so no tenant's key (an admin key included)
reads them: the scrape sends the operator's ``service.metrics_token`` as its bearer
token. Without one configured, ``/metrics`` is off (404, saying how to turn it on).
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from flexmatch.adapters.http.errors import ApiError
from flexmatch.adapters.http.state import ServiceState, get_state

router = APIRouter(tags=["metrics"])


def check_metrics_token(request: Request, state: ServiceState) -> None:
    """The request carries the operator's metrics token, or an ``ApiError`` saying what
    is missing (compared in constant time)."""
    expected = state.kb.config.service.metrics_token
    if expected is None:
        raise ApiError(
            404,
            "not_found",
            "/metrics is off: set service.metrics_token in flexmatch.yaml (for example "
            "${FLEXMATCH_METRICS_TOKEN}) and scrape with it as the bearer token",
        )
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    wanted = expected.get_secret_value().encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), wanted):
        raise ApiError(
            401,
            "unauthorized",
            "/metrics needs the operator's metrics token (service.metrics_token) as "
            "'Authorization: Bearer ...'; API keys do not read it",
            headers={"WWW-Authenticate": "Bearer"},
        )


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text."}},
)
async def metrics(request: Request, state: Annotated[ServiceState, Depends(get_state)]) -> Response:
    """Prometheus metrics of this process (needs the operator's ``service.metrics_token``)."""
    check_metrics_token(request, state)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
