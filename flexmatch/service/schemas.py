"""Request and response bodies of the HTTP API (they make the OpenAPI schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.models import DocumentRecord, SearchResult
from flexmatch.service.jobs import DocumentOutcome, JobStatus
from flexmatch.service.keys import ApiKey, Permission

FilterValue = str | int | bool | list[str] | list[int]
Filters = dict[str, FilterValue]

FILTERS_DOC = (
    "Field conditions, all of which must match: source, document_id, chunk_id, match_kind, "
    "or metadata.<name>; a list matches any of its values."
)


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


class SearchRequest(_Strict):
    query: str = Field(min_length=1)
    top_n: int | None = Field(None, ge=1, le=100, description="Default: the config's top_n.")
    filters: Filters | None = Field(None, description=FILTERS_DOC)
    explain: bool = Field(False, description="Ask for scoring details where supported.")


class SimilarRequest(_Strict):
    text: str = Field(min_length=1)
    top_n: int = Field(5, ge=1, le=100)
    filters: Filters | None = Field(None, description=FILTERS_DOC)


class SearchHit(SearchResult):
    """A result with its rank; explanation fields pass through when the core adds them."""

    model_config = ConfigDict(extra="allow")

    rank: int


class SearchResponse(BaseModel):
    query: str
    results: list[SearchHit]
    explain: bool = Field(description="Whether explanations were computed.")
    cached: bool = False


class KeyCreateRequest(_Strict):
    permissions: list[Permission] = Field(min_length=1)
    name: str = ""


class KeyCreated(BaseModel):
    key: ApiKey
    token: str = Field(description="Shown once; only its hash is stored.")


class Health(BaseModel):
    status: Literal["ok", "ready"]
    checks: dict[str, bool] = Field(default_factory=dict)
