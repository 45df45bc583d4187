"""The stored-point schema: the one place that knows what a Qdrant point carries.

Two kinds of point share one collection. A *match* point is one matching text of a
chunk, with a dense and a BM25 vector; a *document record* point has no vector and
holds a document's state (see ``documents``). Writers build payloads from these models,
readers parse them back with them, the stores index ``INDEXED_FIELDS``, and
``search_filters`` is the one filter vocabulary of every interface.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from flexmatch.errors import FilterError
from flexmatch.models import (
    MATCH_KINDS,
    ChunkView,
    DocumentRecord,
    Learned,
    Location,
    MatchingText,
    MatchKind,
    SearchResult,
    Signals,
    shared_fields,
)

MATCH = "match"
DOCUMENT = "document"
FEEDBACK = "feedback"  # a chunk's unhelpful marks (``engine.feedback``), no vector
LEARNED: MatchKind = "learned"  # a query someone marked the chunk helpful for
CONTENT: MatchKind = "content"  # the match kind of a chunk's own text
QUESTION_KINDS = [kind for kind in MATCH_KINDS if kind != CONTENT]  # the "question" half
# Matching texts phrased as a user would ask (an LLM's questions, the queries people
# marked helpful): the one place that treats them apart. A question's cosine to another
# question is high whatever the topic, so their cosine counts QUERY_LIKE_OFFSET less
# wherever hits of different kinds are compared; and their words join the chunk's BM25
# text (``lexical_text``). Measured on SQuAD dev with perfect, generic and off-topic
# questions (docs/benchmarks.md).
QUERY_LIKE_KINDS: tuple[MatchKind, ...] = ("question", LEARNED)
QUERY_LIKE_OFFSET = 0.15
# Matching texts a model wrote: one whose cosine to its own chunk's text is below
# GENERATED_MIN_COSINE is about something else (an answer meant for another chunk, a
# generic filler) and is not stored (``on_topic``). On SQuAD dev this keeps 98 % of
# real questions about the paragraph and drops 98 % of another paragraph's questions.
GENERATED_KINDS: tuple[MatchKind, ...] = ("question",)
GENERATED_MIN_COSINE = 0.2

POINT_NAMESPACE = uuid.UUID("6f1c2a52-8a0e-4c49-9d1b-5f4b8f1e2a77")
CHUNK_FIELDS = ("content", "qualifying_text", "heading_path", "chunk_index", "location")
RANKING_FIELDS = ("document_id", "chunk_id", "version", "match_kind")  # what ranking reads

FilterValue = str | int | bool | list[str] | list[int]
Filters = dict[str, FilterValue]

# keyword payload indexes the stores create ("tenant" as Qdrant's tenant key)
INDEXED_FIELDS = (
    "tenant",
    "record",
    "document_id",
    "chunk_id",
    "source",
    "version",
    "content_hash",
    "match_kind",
    "unfinished",
    "access",  # read as "any of these tokens, or none at all" (``flexmatch.access``)
)
# what a caller may filter on directly; any other name is a document metadata field
FILTERABLE_FIELDS = ("source", "document_id", "chunk_id", "match_kind")
METADATA_PREFIX = "metadata."
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_INT64 = (-(2**63), 2**63 - 1)
MAX_FILTER_VALUES = 1_000


def calibrated(score: float, kind: object) -> float:
    """A hit's cosine on the scale every kind shares: a query-like text's lowered by
    ``QUERY_LIKE_OFFSET``, any other kind's as it is."""
    return score - QUERY_LIKE_OFFSET if kind in QUERY_LIKE_KINDS else score


def lexical_text(content: str, matching: Iterable[tuple[object, str]]) -> str:
    """The text a chunk's BM25 score is computed over: its own text, then its query-like
    matching texts, given as (kind, text) (the words a question adds: "doc2query"; a
    learned text's, once feedback made it). A chunk without them keeps its text alone."""
    added = [text for kind, text in matching if kind in QUERY_LIKE_KINDS]
    return "\n".join([content, *added])


def on_topic(
    pairs: list[tuple[MatchingText, list[float]]],
) -> list[tuple[MatchingText, list[float]]]:
    """A chunk's (matching text, vector) pairs without the generated texts that are not
    about the chunk: cosine to the chunk's own text below ``GENERATED_MIN_COSINE`` (the
    vectors need not be normalised). Without a chunk text to compare with, every pair is kept."""
    content = next((vector for m, vector in pairs if m.kind == CONTENT), None)
    if content is None:
        return pairs

    def cosine(vector: list[float]) -> float:
        dot = sum(a * b for a, b in zip(vector, content, strict=True))
        norms = math.sqrt(sum(a * a for a in vector) * sum(b * b for b in content))
        return dot / norms if norms else 0.0

    return [
        (m, vector)
        for m, vector in pairs
        if m.kind not in GENERATED_KINDS or cosine(vector) >= GENERATED_MIN_COSINE
    ]


def match_point_id(tenant: str, chunk_id: str, version: str, position: int) -> str:
    """The id of a chunk's ``position``-th matching text in ``version``. Position 0 is the
    chunk's *carrier*: the one point whose payload holds the chunk itself (``CHUNK_FIELDS``),
    so the chunk text is stored once, not with every matching text."""
    return str(uuid.uuid5(POINT_NAMESPACE, json.dumps([tenant, chunk_id, version, position])))


class MatchPayload(BaseModel):
    """The payload of a match point. Every point holds what filters and ranking need; the
    carrier (see ``match_point_id``) also holds the chunk, so a query never re-reads the
    source."""

    model_config = ConfigDict(extra="ignore")  # the store adds "tenant"

    record: Literal["match"] = "match"
    document_id: str
    chunk_id: str
    chunk_index: int = 0
    source: str
    version: str
    uri: str = ""
    title: str = ""
    heading_path: list[str] = []
    content: str = ""
    qualifying_text: str = ""
    matched_text: str = ""
    match_kind: str = "question"  # a MatchKind; read leniently (see matching_text)
    metadata: dict[str, Any] = {}
    location: Location | None = None  # none in chunks stored before locations were kept
    matched_location: Location | None = None  # the matched text's own, when narrower
    access: list[str] | None = None  # who may read it (absent: the whole tenant)
    learned: Learned | None = None  # of a learned matching text (``engine.feedback``)

    def matching_text(self) -> MatchingText:
        kind = self.match_kind if self.match_kind in MATCH_KINDS else "question"
        return MatchingText.model_validate(
            {
                "text": self.matched_text,
                "kind": kind,
                "location": self.matched_location,
                "learned": self.learned,
            }
        )

    def result(self, score: float) -> SearchResult:
        shared = shared_fields(self, SearchResult)
        return SearchResult(**shared, score=score, signals=Signals(first_stage=score))

    def chunk_view(self, matching_texts: list[MatchingText]) -> ChunkView:
        """The chunk this (carrier) point holds, as ``docs show`` shows it."""
        shared = shared_fields(self, ChunkView)
        return ChunkView(
            **shared, id=self.chunk_id, index=self.chunk_index, matching_texts=matching_texts
        )


def filterable_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """The part of a document's metadata a filter can match (strings, integers, booleans,
    and lists of strings or of integers), copied into each of its points so a filter runs
    inside the search. The whole metadata is stored once, on the document's record, and
    results read it from there."""
    return {key: value for key, value in metadata.items() if _matchable(value)}


def _matchable(value: object) -> bool:
    if isinstance(value, list):
        strings = all(isinstance(item, str) for item in value)
        return bool(value) and (strings or all(_integer(item) for item in value))
    return isinstance(value, str | bool) or _integer(value)


def _integer(value: object) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool) and _INT64[0] <= value <= _INT64[1]
    )


def record_payload(record: DocumentRecord) -> dict[str, Any]:
    """The payload of a document record point."""
    # a keyword, not a bool: qdrant-edge matches no boolean value in filters
    unfinished = record.pending_version is not None or record.status in ("pending", "removing")
    return {
        "record": DOCUMENT,
        "document_id": record.id,
        "unfinished": "yes" if unfinished else "no",
        **record.model_dump(),
    }


def parse_record(payload: dict[str, Any]) -> DocumentRecord:
    fields = DocumentRecord.model_fields
    return DocumentRecord.model_validate({k: v for k, v in payload.items() if k in fields})


def search_filters(filters: dict[str, Any] | None) -> Filters:
    """A caller's filters as payload conditions, checked: the one vocabulary of the Python
    API, the CLI, HTTP and MCP.

    ``source``, ``document_id``, ``chunk_id`` and ``match_kind`` match the point itself;
    ``metadata.NAME`` (or a bare ``NAME``) matches the document's metadata. A value is a
    string, an integer or a boolean; a list matches any of its values.
    """
    mapped: Filters = {}
    for field, value in (filters or {}).items():
        mapped[_filter_field(field)] = _filter_value(field, value)
    return mapped


def _filter_field(field: object) -> str:
    if not isinstance(field, str):
        raise FilterError(f"filter field {field!r} is not a name")
    if field in FILTERABLE_FIELDS:
        return field
    name = field.removeprefix(METADATA_PREFIX)
    reserved = name in MatchPayload.model_fields or name in INDEXED_FIELDS
    if _NAME.match(name) and not (reserved and not field.startswith(METADATA_PREFIX)):
        return METADATA_PREFIX + name
    raise FilterError(
        f"cannot filter on '{field}': use {', '.join(FILTERABLE_FIELDS)} or metadata.<name> "
        "(a name of letters, digits, '_' or '-'; a bare name means metadata.<name>)"
    )


def _filter_value(field: str, value: object) -> FilterValue:
    if isinstance(value, list):
        if not value or len(value) > MAX_FILTER_VALUES:
            raise FilterError(f"filter '{field}': a list needs 1 to {MAX_FILTER_VALUES:,} values")
        items = [_scalar(field, item) for item in value]
        strings = [item for item in items if isinstance(item, str)]
        if len(strings) == len(items):
            return strings
        integers = [item for item in items if isinstance(item, int) and not isinstance(item, bool)]
        if len(integers) == len(items):
            return integers
        raise FilterError(f"filter '{field}': a list holds only strings or only integers")
    return _scalar(field, value)


def _scalar(field: str, value: object) -> str | int | bool:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise FilterError(f"filter '{field}': {value} is outside the 64-bit integer range")
        return value
    kind = type(value).__name__
    raise FilterError(
        f"filter '{field}': a value must be a string, an integer or a boolean, not {kind}"
    )
