"""Request and response bodies of the HTTP API (they make the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from flexmatch import (
    MAX_QUERY_CHARS,
    Access,
    DocumentOutcome,
    DocumentRecord,
    JobStatus,
    Principal,
    ToolResult,
)
from flexmatch.service import ApiKey, KeyStore, Permission, SyncRun

FILTERS_DOC = (
    "Field conditions, all of which must match: source, document_id, chunk_id, match_kind, "
    "or metadata.<name> (a bare name means metadata.<name>); a value is a string, an "
    "integer or a boolean, and a list matches any of its values. Any other value is a 422 "
    "'invalid_filter' naming the field."
)


# Any JSON is taken here and checked by the knowledge base's filter rules, so a float, an
# object or a list of mixed types is a 422 ``invalid_filter`` naming its field, like every
# other bad filter (a model type would turn some of them into ``validation_error``).
RawFilters = Annotated[
    Any,
    WithJsonSchema({"anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}]}),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UrlImportRequest(_Strict):
    urls: list[str] = Field(min_length=1, description="http(s) URLs; the web safety rules apply.")
    source: str | None = Field(None, description="A source from flexmatch.yaml.")


class RecordsRequest(_Strict):
    records: list[dict[str, Any]] = Field(min_length=1, description="JSON objects.")
    source: str | None = Field(None, description="A source of type 'records'.")


class JobAccepted(BaseModel):
    job_id: str
    status: JobStatus
    total: int
    url: str = Field(description="Where to poll the job.")


class SourceStatus(BaseModel):
    """A source of the knowledge base and its syncs for the caller's tenant."""

    name: str
    type: str
    description: str = ""
    schedule_seconds: float | None = Field(
        None, description="Its sync interval (sources.NAME.schedule); null: synced on request."
    )
    scheduled: bool = Field(
        False, description="Whether its schedule runs for this tenant (schedule_tenants)."
    )
    running: bool = Field(False, description="A sync of it runs now, on any replica.")
    running_job: str | None = Field(None, description="That sync's job (GET /v1/jobs/{id}).")
    last_run: SyncRun | None = Field(
        None, description="Its last sync for this tenant: outcome, counts, LLM cost."
    )
    next_run: str | None = Field(
        None, description="When the schedule syncs it next (a past time: at the next check)."
    )


class DocumentList(BaseModel):
    items: list[DocumentRecord]
    total: int
    limit: int
    offset: int


class ReplaceResult(BaseModel):
    outcome: DocumentOutcome
    document: DocumentRecord


class Deleted(BaseModel):
    id: str
    deleted: bool = True


PRINCIPAL_DOC = (
    "Search as this end user ({user, groups}): only a service or admin key may name one "
    "(as the X-FlexMatch-Principal header does)."
)


class AccessRequest(_Strict):
    """A document's new access: ``public`` and/or ``principals``; ``null`` for the whole
    tenant."""

    access: Access | None


QUERY_DOC = (
    f"Not blank, and at most the server's limit ({MAX_QUERY_CHARS:,} characters unless it "
    "sets another): a 422 empty_query or query_too_long otherwise."
)


EXPAND_DOC = (
    "'section' or 'neighbours': a short result, or several of one section, comes with its "
    "section or neighbouring chunks (context), within the config's expand_budget_tokens; "
    "'none'. Default: the config's query.expand."
)


class SearchRequest(_Strict):
    query: str = Field(description=QUERY_DOC)  # blank: check_query's empty_query
    top_n: int | None = Field(None, ge=1, le=100, description="Default: the config's top_n.")
    filters: RawFilters = Field(None, description=FILTERS_DOC)
    depth: str = Field(  # checked by the knowledge base's rule: a 422 invalid_depth
        "fast",
        description="'fast': one search; 'deep': its first results seed follow-up "
        "searches (each result's hop in its explanation, the cost in 'cost').",
    )
    expand: str | None = Field(None, description=EXPAND_DOC)
    explain: bool = Field(False, description="Ask for scoring details where supported.")
    principal: Principal | None = Field(None, description=PRINCIPAL_DOC)


class FeedbackRequest(_Strict):
    query: str = Field(description="The query the chunk was found for (not blank).")
    chunk_id: str = Field(description="The result's chunk_id.")
    helpful: bool = Field(
        True, description="true: it answered the query; false: it did not (demoted)."
    )
    principal: Principal | None = Field(None, description=PRINCIPAL_DOC)


class SimilarRequest(_Strict):
    text: str = Field(description="Not blank: a 422 empty_text otherwise.")
    top_n: int = Field(5, ge=1, le=100)
    filters: RawFilters = Field(None, description=FILTERS_DOC)
    principal: Principal | None = Field(None, description=PRINCIPAL_DOC)


class ReadBody(_Strict):
    """``POST /v1/documents/{id}/read``: which part (``KnowledgeBase.read``'s rules,
    checked by the knowledge base: the same ``invalid_read`` answer as the Python API)."""

    section: str | None = Field(None, description="A heading path from the outline, or a heading.")
    pages: list[int] | None = Field(None, description="[first, last] page (inclusive).")
    lines: list[int] | None = Field(None, description="[first, last] line (inclusive).")
    chunk: int | None = Field(None, description="A chunk index (a result's chunk_index).")
    before: int = Field(0, description="Chunks before it (with chunk).")
    after: int = Field(0, description="Chunks after it (with chunk).")


class GrepBody(_Strict):
    """``POST /v1/grep`` (``KnowledgeBase.grep``'s rules, checked by the knowledge base)."""

    pattern: str = Field(description="The text to find (a regular expression with regex).")
    regex: bool = False
    ignore_case: bool = False
    filters: RawFilters = Field(None, description=FILTERS_DOC)
    limit: int = Field(20, description="How many lines at most (at most 200).")


class SearchResponse(ToolResult):
    """The tool result (the same results every interface returns), with request facts."""

    total: int = Field(description="How many results there are.")
    took_ms: float = Field(description="Time the search took, in milliseconds.")
    explain: bool = Field(description="Whether each result carries its explanation.")
    cached: bool = False


class KeyCreateRequest(_Strict):
    permissions: list[Permission] = Field(min_length=1)
    name: str = Field(
        "",
        max_length=KeyStore.NAME_MAX,
        description="A note on who or what uses the key: printable text, no control characters.",
    )
    # who it reads documents as (see docs/security.md, "Access control")
    principal: str | None = Field(None, description="user:NAME: a person's key.")
    groups: list[str] = Field(default_factory=list, max_length=100, description="Their groups.")
    service: bool = Field(False, description="A service key naming the end user per request.")


class KeyCreated(BaseModel):
    key: ApiKey
    token: str = Field(description="Shown once; only its hash is stored.")


class Health(BaseModel):
    status: Literal["ok", "ready"]
    checks: dict[str, bool] = Field(default_factory=dict)
