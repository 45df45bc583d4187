"""Feedback over HTTP and through ``Client``, against a real server: the ``feedback``
permission, tenants, the rate limit's 429, the answer cache, an admin's removal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flexmatch import Client, DocumentNotFoundError, FeedbackRateError
from flexmatch.testing import HashEmbedder
from tests.adapters.http.harness import Api, running_api

QUERY = "wrought iron landmark height"  # no word of any record
FACTS = [
    {"fact_id": "tower", "subject": "Tower", "text": "The Eiffel tower stands in Paris."},
    {"fact_id": "fruit", "subject": "Fruit", "text": "Bananas are rich in potassium."},
]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    folder: Path = tmp_path_factory.mktemp("feedback") / "kb"
    with running_api(folder, HashEmbedder()) as running:  # type: ignore[arg-type]
        for tenant in ("a", "b"):
            assert not running.kb.add_records(FACTS, source="facts", tenant=tenant).failed
        running.key("admin", "a", "admin")
        running.key("reader", "a", "read")
        running.key("giver", "a", "read,feedback")
        running.key("other", "b", "read,feedback")
        yield running


def post(api: Api, key: str, body: dict[str, Any]) -> Any:
    headers = {"Authorization": f"Bearer {api.tokens[key]}"}
    return api.client.post("/v1/feedback", json=body, headers=headers)


def search(api: Api, key: str) -> Any:
    headers = {"Authorization": f"Bearer {api.tokens[key]}"}
    return api.client.post("/v1/search", json={"query": QUERY, "top_n": 1}, headers=headers)


def test_a_feedback_key_marks_a_chunk_and_the_next_search_finds_it(api: Api) -> None:
    first = search(api, "giver")
    assert all(r["matched_text"] != QUERY for r in first.json()["results"])
    assert search(api, "giver").headers["X-Cache"] == "hit"
    refused = post(api, "reader", {"query": QUERY, "chunk_id": "fruit#0"})
    assert refused.status_code == 403, refused.text  # read alone does not grant feedback
    kept = post(api, "giver", {"query": QUERY, "chunk_id": "fruit#0", "helpful": True})
    assert kept.status_code == 200, kept.text
    assert kept.json()["learned_id"] and kept.json()["merged"] is False
    after = search(api, "giver")
    assert after.headers["X-Cache"] == "miss"  # the ranking changed: the cache let go
    top = after.json()["results"][0]
    assert (top["chunk_id"], top["matched_text"]) == ("fruit#0", QUERY)
    headers = {"Authorization": f"Bearer {api.tokens['giver']}"}
    detail = api.client.get("/v1/documents/fruit", headers=headers).json()
    (learned,) = [m for m in detail["chunks"][0]["matching_texts"] if m["kind"] == "learned"]
    assert learned["text"] == QUERY and learned["learned"]["marks"][0]["who"] == "no user"
    # an admin removes it; a feedback key may not
    path = f"/v1/learned/{learned['learned']['id']}"
    assert api.client.delete(path, headers=headers).status_code == 403
    admin = {"Authorization": f"Bearer {api.tokens['admin']}"}
    assert api.client.delete(path, headers=admin).json() == {"removed": learned["learned"]["id"]}
    assert api.client.delete(path, headers=admin).json()["error"]["code"] == "not_found"


def test_another_tenants_chunk_is_answered_as_a_missing_one(api: Api) -> None:
    # tenant b has its own "fruit"; tenant a's learned texts never reach it
    post(api, "giver", {"query": "only in tenant a", "chunk_id": "tower#0"})
    mine = api.kb.get_document("tower", tenant="b")
    assert all(m.kind != "learned" for c in mine.chunks for m in c.matching_texts)
    missing = post(api, "other", {"query": QUERY, "chunk_id": "nothing#0"})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_past_the_rate_limit_the_answer_is_a_429(api: Api) -> None:
    settings = api.kb.config.feedback
    before, settings.per_minute = settings.per_minute, 1
    try:
        api.kb._feedback.rate = type(api.kb._feedback.rate)()  # a fresh minute
        assert post(api, "giver", {"query": "one", "chunk_id": "tower#0"}).status_code == 200
        limited = post(api, "giver", {"query": "two", "chunk_id": "tower#0"})
        assert limited.status_code == 429
        assert limited.json()["error"]["code"] == "feedback_rate_limited"
        with (
            Client(str(api.client.base_url), api.tokens["giver"]) as client,
            pytest.raises(FeedbackRateError, match=r"feedback\.per_minute"),
        ):
            client.add_feedback("three", "tower#0")
    finally:
        settings.per_minute = before


def test_the_client_gives_feedback_and_an_admin_client_removes_it(api: Api) -> None:
    with Client(str(api.client.base_url), api.tokens["giver"]) as client:
        receipt = client.add_feedback("potassium source question", "fruit#0")
        unhelpful = client.add_feedback(QUERY, "tower#0", helpful=False)
        with pytest.raises(DocumentNotFoundError, match="no chunk"):
            client.add_feedback(QUERY, "nothing#0")
    assert receipt.learned_id and unhelpful.helpful is False
    with Client(str(api.client.base_url), api.tokens["admin"]) as admin:
        admin.remove_learned(receipt.learned_id)
        with pytest.raises(DocumentNotFoundError):
            admin.remove_learned(receipt.learned_id)
