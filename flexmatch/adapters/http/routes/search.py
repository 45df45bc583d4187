"""Search, similar chunks and stats, always inside the caller's tenant, with a result cache."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response

from flexmatch import (
    Principal,
    Stats,
    answer_result,
    check_depth,
    check_expand,
    check_query,
    search_filters,
    tool_result,
)
from flexmatch.adapters.http.auth import Caller, require
from flexmatch.adapters.http.errors import ApiError, reject_unknown_query
from flexmatch.adapters.http.schemas import (
    EXPAND_DOC,
    SearchRequest,
    SearchResponse,
    SimilarRequest,
)
from flexmatch.adapters.http.state import ServiceState, get_state

router = APIRouter(prefix="/v1", tags=["search"], dependencies=[Depends(reject_unknown_query)])

Reader = Annotated[Caller, Depends(require("read"))]
State = Annotated[ServiceState, Depends(get_state)]


def check_text(state: ServiceState, text: str, what: str = "query") -> str:
    """The query rule every interface keeps, with this server's length limit (a
    ``QueryError`` is answered with its own status and code)."""
    return check_query(text, limit=state.limits.max_query_chars, what=what)


async def run_search(
    state: ServiceState,
    tenant: str,
    kind: Literal["search", "similar"],
    text: str,
    top_n: int | None,
    filters: Any,
    explain: bool,
    response: Response,
    reader: Principal | None = None,
    depth: str = "fast",
    expand: str | None = None,
) -> SearchResponse:
    """Answer from the cache, or ask the knowledge base and remember the answer; only
    what ``reader`` may read (the cache keeps each reader's answers apart).

    Filters are checked by the knowledge base's own rules (the one vocabulary of every
    interface), first, so any bad value is a 422 ``invalid_filter`` naming its field and
    never reaches the cache."""
    check_text(state, text, "query" if kind == "search" else "text")
    if filters is not None and not isinstance(filters, dict):
        raise ApiError(422, "invalid_filter", "filters must be a JSON object of field conditions")
    search_filters(filters)  # raises FilterError: 422 invalid_filter
    deep = check_depth(depth) == "deep"  # raises DepthError: 422 invalid_depth
    mode = None if expand is None else check_expand(expand)  # QueryError: 422 invalid_expand
    explain = explain and kind == "search"
    readers = None if reader is None else reader.key()  # None: the admin's, everything
    asked = "deep" if deep else kind  # a fast search's key is as it always was
    key = state.cache.key(tenant, asked, text, top_n, filters, explain, readers, mode)
    # with the query log on, every search reaches the knowledge base, which logs it
    logged = kind == "search" and state.kb.config.query_log.enabled
    cached = None if logged else state.cache.get(key)
    if not logged:
        state.metrics.cache_lookup(cached is not None)
    if cached is not None:
        response.headers["X-Cache"] = "hit"
        return cached.model_copy(update={"cached": True})
    await state.warmed()
    if kind == "search":
        answer = await state.kb.asearch(
            text,
            top_n=top_n,
            filters=filters,
            depth="deep" if deep else "fast",
            expand=mode,
            tenant=tenant,
            principal=reader,
        )
        formatting = time.perf_counter()
        result, took = answer_result(answer, explain=explain), answer.took_ms
        format_ms = (time.perf_counter() - formatting) * 1000
        state.metrics.search({**answer.stage_ms, "format": format_ms})
    else:
        started = time.perf_counter()
        results = await state.kb.asimilar(
            text, top_n=top_n or 5, filters=filters, tenant=tenant, principal=reader
        )
        result = tool_result(text, results)
        took = round((time.perf_counter() - started) * 1000, 1)
    answer_body = SearchResponse(
        **result.model_dump(), total=len(result.results), took_ms=took, explain=explain
    )
    if not logged:
        state.cache.put(key, answer_body)
    response.headers["X-Cache"] = "miss"
    return answer_body


@router.post("/search", response_model=SearchResponse, response_model_exclude_none=True)
async def search(
    body: SearchRequest, principal: Reader, state: State, response: Response
) -> SearchResponse:
    """The chunks that best answer the query, best first."""
    return await run_search(
        state,
        principal.tenant,
        "search",
        body.query,
        body.top_n,
        body.filters,
        body.explain,
        response,
        principal.read_as(body.principal),
        body.depth,
        body.expand,
    )


@router.get("/search", response_model=SearchResponse, response_model_exclude_none=True)
async def search_get(
    principal: Reader,
    state: State,
    response: Response,
    query: Annotated[str, Query(min_length=1)],
    top_n: Annotated[int | None, Query(ge=1, le=100)] = None,
    limit: Annotated[
        int | None, Query(ge=1, le=100, description="The same as top_n (a common name).")
    ] = None,
    source: Annotated[str | None, Query(description="Only this source.")] = None,
    expand: Annotated[str | None, Query(description=EXPAND_DOC)] = None,
    explain: bool = False,
) -> SearchResponse:
    """``POST /v1/search`` as a link: the query in the URL, an optional source filter."""
    if top_n is not None and limit is not None and top_n != limit:
        raise ApiError(422, "conflicting_parameters", "top_n and limit differ; send one")
    filters: dict[str, Any] | None = {"source": source} if source else None
    return await run_search(
        state,
        principal.tenant,
        "search",
        query,
        top_n or limit,
        filters,
        explain,
        response,
        principal.reader,
        expand=expand,
    )


@router.post("/search/similar", response_model=SearchResponse, response_model_exclude_none=True)
async def search_similar(
    body: SimilarRequest, principal: Reader, state: State, response: Response
) -> SearchResponse:
    """The chunks most similar to a text, by embedding alone (no rewrite, no reranking)."""
    reader = principal.read_as(body.principal)
    return await run_search(
        state,
        principal.tenant,
        "similar",
        body.text,
        body.top_n,
        body.filters,
        False,
        response,
        reader,
    )


@router.get("/stats", response_model=Stats)
async def stats(principal: Reader, state: State) -> Stats:
    """Documents, chunks and matching texts per source in the caller's tenant; to an
    admin key of a service whose keys are all its own tenant's, the store's size on disk
    too. It counts every tenant's documents, so where other tenants have keys it would
    tell one tenant how much another writes: null there (the operator's ``/metrics``
    has it, ``flexmatch_store_bytes``)."""
    result = state.kb.stats(tenant=principal.tenant, principal=principal.reader)
    admin = "admin" in principal.permissions
    size = await state.store_bytes_for(principal.tenant, admin, result.store_bytes)
    return result.model_copy(update={"store_bytes": size})
