"""The service's answer cache lets go of a tenant's answers after any write to it, not
only one made over HTTP: here the writes go through the ``KnowledgeBase`` object itself
(as another process's ``flexmatch docs remove`` through the server's store does)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flexmatch import Access, KnowledgeBase
from flexmatch.adapters.http import create_app
from flexmatch.testing import HashEmbedder
from tests.adapters.http.harness import KB_CONFIG, Api, running_api
from tests.conftest import write_config

QUERY = "Where does the lighthouse keeper keep the spare lamp?"
FACTS = [
    {"fact_id": "lamp", "subject": "Lamp", "text": "The spare lamp is kept in the oil shed."},
    {"fact_id": "boat", "subject": "Boat", "text": "The keeper's boat is moored at the pier."},
    {"fact_id": "log", "subject": "Log", "text": "The keeper writes the log each evening."},
]


@dataclass
class Tenant:
    """The running server, and a tenant of one test's own holding ``FACTS``."""

    api: Api
    name: str
    token: str

    @property
    def kb(self) -> KnowledgeBase:
        return self.api.kb

    def ask(self, principal: str | None = None) -> tuple[str, set[str], str]:
        """The X-Cache header, the results' document ids and their text, as the tenant's
        admin key reading as ``principal``."""
        body: dict[str, Any] = {"query": QUERY, "top_n": 10}
        if principal is not None:
            body["principal"] = {"user": principal}
        headers = {"Authorization": f"Bearer {self.token}"}
        response = self.api.client.post("/v1/search", json=body, headers=headers)
        assert response.status_code == 200, response.text
        results = response.json()["results"]
        return response.headers["x-cache"], {r["document_id"] for r in results}, str(results)

    def cached(self, principal: str | None = None) -> set[str]:
        """Ask twice: a miss, then the same answer from the cache."""
        assert self.ask(principal)[0] == "miss"
        state, found, _ = self.ask(principal)
        assert state == "hit"
        return found


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    folder: Path = tmp_path_factory.mktemp("cache") / "kb"
    with running_api(folder, HashEmbedder()) as running:  # type: ignore[arg-type]
        yield running


@pytest.fixture
def acme(server: Api, request: pytest.FixtureRequest) -> Tenant:
    name = request.node.name.removeprefix("test_")[:40]
    assert not server.kb.add_records(FACTS, source="facts", tenant=name).failed
    return Tenant(server, name, server.key(name, name, "admin"))


def test_a_document_removed_in_python_is_not_served_from_the_cache(acme: Tenant) -> None:
    assert "lamp" in acme.cached()
    acme.kb.remove_document("lamp", tenant=acme.name)  # not through HTTP
    state, found, text = acme.ask()
    assert state == "miss" and "lamp" not in found
    assert "oil shed" not in text  # nor its text


def test_an_ingest_in_python_is_found_at_once(acme: Tenant) -> None:
    assert "shed" not in acme.cached()
    better = {"fact_id": "shed", "subject": "Shed", "text": "Where the spare lamp is kept."}
    assert not acme.kb.add_records([better], source="facts", tenant=acme.name).failed
    state, found, _ = acme.ask()
    assert state == "miss" and "shed" in found


def test_an_access_revoked_in_python_is_not_served_from_the_cache(acme: Tenant) -> None:
    assert "lamp" in acme.cached("user:alice")
    acme.kb.set_access("lamp", Access(principals=["user:bob"]), tenant=acme.name)
    state, found, _ = acme.ask("user:alice")
    assert state == "miss" and "lamp" not in found
    assert "lamp" in acme.ask("user:bob")[1]


def test_another_tenants_write_keeps_this_tenants_answers(acme: Tenant) -> None:
    acme.cached()
    assert not acme.kb.add_records(FACTS[:1], source="facts", tenant="elsewhere").failed
    assert acme.ask()[0] == "hit"


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


def test_a_stopped_service_hears_no_more_writes(tmp_path: Path) -> None:
    write_config(tmp_path, KB_CONFIG)
    with KnowledgeBase.open(tmp_path, embedder=HashEmbedder(), env={}) as kb:  # type: ignore[arg-type]
        app = create_app(kb)
        generations = app.state.service.cache.generations
        with TestClient(app):
            kb.add_records(FACTS[:1], source="facts", tenant="t1")
            assert generations.current("t1") == 1
        kb.add_records(FACTS[1:], source="facts", tenant="t1")
        assert generations.current("t1") == 1  # its listener went with it
