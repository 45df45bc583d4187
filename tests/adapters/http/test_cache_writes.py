"""The service's answer cache lets go of a tenant's answers after any write to it, not
only one made over HTTP: here the writes go through the ``KnowledgeBase`` object itself
(as another process's ``flexmatch docs rm`` through the server's store does)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flexmatch import Access, KnowledgeBase
from flexmatch.testing import HashEmbedder
from tests.adapters.http.harness import KB_CONFIG, Api, running_api
from tests.conftest import write_config

QUERY = "Where does the lighthouse keeper keep the spare lamp?"
FACTS = [
    {"fact_id": "lamp", "subject": "Lamp", "text": "The spare lamp is kept in the oil shed."},
    {"fact_id": "boat", "subject": "Boat", "text": "The keeper's boat is moored at the pier."},
    {"fact_id": "log", "subject": "Log", "text": "The keeper writes the log each evening."},
]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with running_api(tmp_path / "kb", HashEmbedder()) as running:  # type: ignore[arg-type]
        assert not running.kb.add_records(FACTS, source="facts", tenant="acme").failed
        running.key("admin", "acme", "admin")
        yield running


def ask(api: Api, principal: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The X-Cache header and the results of the query, as the admin key or ``principal``."""
    body: dict[str, Any] = {"query": QUERY, "top_n": 10}
    if principal is not None:
        body["principal"] = {"user": principal}
    headers = {"Authorization": f"Bearer {api.tokens['admin']}"}
    response = api.client.post("/v1/search", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.headers["x-cache"], response.json()["results"]


def cached_twice(api: Api, principal: str | None = None) -> list[dict[str, Any]]:
    assert ask(api, principal)[0] == "miss"
    state, results = ask(api, principal)
    assert state == "hit"
    return results


def test_a_document_removed_in_python_is_not_served_from_the_cache(api: Api) -> None:
    before = cached_twice(api)
    assert "lamp" in {r["document_id"] for r in before}
    api.kb.remove_document("lamp", tenant="acme")  # not through HTTP
    state, after = ask(api)
    assert state == "miss"
    assert "lamp" not in {r["document_id"] for r in after}
    assert all("oil shed" not in str(r) for r in after)  # not its text either


def test_an_ingest_in_python_is_found_at_once(api: Api) -> None:
    before = cached_twice(api)
    assert "shed" not in {r["document_id"] for r in before}
    better = {"fact_id": "shed", "subject": "Shed", "text": "Where the spare lamp is kept."}
    assert not api.kb.add_records([better], source="facts", tenant="acme").failed
    state, after = ask(api)
    assert state == "miss" and "shed" in {r["document_id"] for r in after}


def test_an_access_revoked_in_python_is_not_served_from_the_cache(api: Api) -> None:
    before = cached_twice(api, "user:alice")
    assert "lamp" in {r["document_id"] for r in before}
    api.kb.set_access("lamp", Access(principals=["user:bob"]), tenant="acme")
    state, after = ask(api, "user:alice")
    assert state == "miss" and "lamp" not in {r["document_id"] for r in after}
    assert "lamp" in {r["document_id"] for r in ask(api, "user:bob")[1]}


def test_another_tenants_write_keeps_this_tenants_answers(api: Api) -> None:
    cached_twice(api)
    assert not api.kb.add_records(FACTS[:1], source="facts", tenant="other").failed
    assert ask(api)[0] == "hit"


def test_every_write_path_tells_the_listeners(tmp_path: Path) -> None:
    """``KnowledgeBase.on_write`` hears each kind of write once it is done, with its tenant."""
    write_config(tmp_path, KB_CONFIG)
    with KnowledgeBase.open(tmp_path, embedder=HashEmbedder(), env={}) as kb:  # type: ignore[arg-type]
        heard: list[str] = []
        kb.on_write(heard.append)
        kb.add_records(FACTS, source="facts", tenant="t1")
        assert heard == ["t1"]
        kb.update_metadata("boat", {"pier": "north"}, tenant="t1")
        kb.set_access("boat", Access(public=True), tenant="t1")
        kb.add_feedback("where is the boat moored?", "boat#0", tenant="t1")
        learned = [
            m.learned.id
            for c in kb.get_document("boat", tenant="t1").chunks
            for m in c.matching_texts
            if m.learned is not None
        ]
        kb.remove_learned(learned[0], tenant="t1")
        kb.remove_document("log", tenant="t1")
        assert heard == ["t1"] * 6
