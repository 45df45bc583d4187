"""The stored-point schema: payloads round-trip through their models, and one filter
vocabulary is checked the same way for every interface."""

from __future__ import annotations

import pytest

from flexmatch.engine.points import (
    DOCUMENT,
    FILTERABLE_FIELDS,
    MATCH,
    MatchPayload,
    parse_record,
    record_payload,
    search_filters,
)
from flexmatch.errors import FilterError
from flexmatch.models import DocumentRecord


def test_match_payload_round_trips_and_makes_a_result() -> None:
    payload = MatchPayload(
        document_id="d1",
        chunk_id="d1#0",
        chunk_index=0,
        source="default",
        version="v1",
        uri="/docs/a.md",
        title="A",
        heading_path=["A", "B"],
        content="The harbour opens at six.",
        qualifying_text="From A › B.",
        matched_text="When does the harbour open?",
        match_kind="question",
        metadata={"tags": ["port"]},
    )
    stored = {**payload.model_dump(), "tenant": "t1"}  # the store adds the tenant
    assert stored["record"] == MATCH
    again = MatchPayload.model_validate(stored)
    assert again == payload
    result = again.result(0.75)
    assert (result.chunk_id, result.matched_text, result.score) == (
        "d1#0",
        "When does the harbour open?",
        0.75,
    )
    assert result.signals.first_stage == 0.75 and result.metadata == {"tags": ["port"]}
    assert again.matching_text().kind == "question"


def test_document_record_payload_round_trips_with_its_flags() -> None:
    record = DocumentRecord(id="d1", source="s", uri="u", content_hash="h", pending_version="v2")
    payload = record_payload(record)
    assert payload["record"] == DOCUMENT and payload["document_id"] == "d1"
    assert payload["unfinished"] == "yes"  # a keyword: qdrant-edge matches no booleans
    assert parse_record({**payload, "tenant": "t"}) == record
    done = record.model_copy(update={"pending_version": None, "status": "complete"})
    assert record_payload(done)["unfinished"] == "no"


def test_filter_vocabulary() -> None:
    assert set(FILTERABLE_FIELDS) == {"source", "document_id", "chunk_id", "match_kind"}
    assert search_filters(None) == {}
    assert search_filters(
        {
            "source": "web",
            "document_id": ["a", "b"],
            "tags": "port",  # a bare name is a metadata field
            "metadata.year": 2024,
            "metadata.public": True,
        }
    ) == {
        "source": "web",
        "document_id": ["a", "b"],
        "metadata.tags": "port",
        "metadata.year": 2024,
        "metadata.public": True,
    }


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"uri": "x"}, "cannot filter on 'uri'"),  # a stored field, but not a filter
        ({"tenant": "other"}, "cannot filter on 'tenant'"),  # never the caller's to set
        ({"version": "v1"}, "cannot filter on 'version'"),
        ({"metadata.a b": "x"}, "cannot filter on 'metadata.a b'"),
        ({"bad name": "x"}, "cannot filter on 'bad name'"),
        ({"year": 2**63}, "outside the 64-bit integer range"),
        ({"year": -(2**63) - 1}, "outside the 64-bit integer range"),
        ({"score": 0.5}, "not float"),
        ({"tags": {"a": 1}}, "not dict"),
        ({"tags": []}, "a list needs 1 to"),
        ({"tags": ["a", 1]}, "only strings or only integers"),
        ({"tags": [True, False]}, "only strings or only integers"),
    ],
)
def test_bad_filters_name_what_is_wrong(filters: dict, message: str) -> None:
    with pytest.raises(FilterError, match=message.replace("(", r"\(")):
        search_filters(filters)


def test_metadata_prefix_may_name_a_reserved_word() -> None:
    """``metadata.uri`` is the document's own metadata field, not the stored uri."""
    assert search_filters({"metadata.uri": "x"}) == {"metadata.uri": "x"}
    assert search_filters({"year": 2**63 - 1}) == {"metadata.year": 2**63 - 1}
