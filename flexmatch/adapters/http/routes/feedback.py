"""Feedback: whether a result answered a query (learned matching texts, demotions), and
an admin's removal of a learned matching text."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from flexmatch import FeedbackReceipt
from flexmatch.adapters.http.auth import Caller, require
from flexmatch.adapters.http.errors import reject_unknown_query
from flexmatch.adapters.http.routes.search import check_text
from flexmatch.adapters.http.schemas import FeedbackRequest
from flexmatch.adapters.http.state import ServiceState, get_state

router = APIRouter(prefix="/v1", tags=["feedback"], dependencies=[Depends(reject_unknown_query)])

Giver = Annotated[Caller, Depends(require("feedback"))]
Admin = Annotated[Caller, Depends(require("admin"))]
State = Annotated[ServiceState, Depends(get_state)]


@router.post("/feedback", response_model=FeedbackReceipt)
async def add_feedback(body: FeedbackRequest, principal: Giver, state: State) -> FeedbackReceipt:
    """Whether a chunk answered a query (keys with the ``feedback`` permission). Helpful:
    the query becomes a learned matching text of the chunk; unhelpful: the chunk moves
    down for queries near this one. A chunk the caller may not read is a 404, as a
    missing one; past ``feedback.per_minute`` a 429 ``feedback_rate_limited``."""
    check_text(state, body.query)
    await state.warmed()
    receipt = await state.kb.aadd_feedback(
        body.query,
        body.chunk_id,
        body.helpful,
        tenant=principal.tenant,
        principal=principal.read_as(body.principal),
    )
    return receipt


@router.delete("/learned/{learned_id}")
async def remove_learned(learned_id: str, principal: Admin, state: State) -> dict[str, str]:
    """Remove a learned matching text (admin keys; its id: the document's
    ``matching_texts[].learned.id``)."""
    await state.kb.aremove_learned(learned_id, tenant=principal.tenant)
    return {"removed": learned_id}
