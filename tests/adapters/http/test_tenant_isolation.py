"""A key of tenant B tries every endpoint on tenant A's objects: it sees nothing of A's,
changes nothing of A's, and gets the same 404 as for ids that exist nowhere."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from flexmatch.engine.embedders import OnnxEmbedder
from tests.adapters.http.harness import Api, running_api, upload
from tests.adapters.http.servers import PageServer, assert_error, auth, wait_for_job
from tests.conftest import DOCS

BLANKETS = "How many blankets were delivered?"


@dataclass
class Tenants:
    api: Api
    a: str  # tenant A's read/write/admin key
    b: str  # tenant B's read/write/admin key
    a_memo: str
    a_record: str
    a_job: str
    a_key_id: str
    b_doc: str


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Tenants]:
    with running_api(tmp_path_factory.mktemp("tenants") / "kb", embedder) as api:
        a = api.key("a", "tenant-a", "read,write,admin")
        b = api.key("b", "tenant-b", "read,write,admin")
        job = wait_for_job(api.client, upload(api, a, DOCS / "pdf_fake-memo.pdf"), a)
        a_memo = job["documents"][0]["document_id"]
        records = api.client.post(
            "/v1/records",
            json={"records": [{"fact_id": "secret-1", "subject": "Vault", "code": "4711"}]},
            headers=auth(a),
        )
        wait_for_job(api.client, records.json()["job_id"], a)
        b_job = wait_for_job(
            api.client,
            upload(api, b, ("b-notes.txt", b"Tenant B keeps 12 blankets in the attic.")),
            b,
        )
        yield Tenants(
            api=api,
            a=a,
            b=b,
            a_memo=a_memo,
            a_record="secret-1",
            a_job=job["id"],
            a_key_id=a.split("_")[1],
            b_doc=b_job["documents"][0]["document_id"],
        )


def a_snapshot(t: Tenants) -> dict:
    """Everything tenant A can see of its own data."""
    client, a = t.api.client, t.api.tokens["a"]
    docs = client.get("/v1/documents", headers=auth(a)).json()
    memo = client.get(f"/v1/documents/{t.a_memo}", headers=auth(a)).json()
    found = client.post("/v1/search", json={"query": BLANKETS, "top_n": 1}, headers=auth(a)).json()
    stats = client.get("/v1/stats", headers=auth(a)).json()
    return {"docs": docs, "memo": memo, "first": found["results"][0]["document_id"], "stats": stats}


def test_b_sees_nothing_of_a(tenants: Tenants) -> None:
    client, b = tenants.api.client, tenants.b
    before = a_snapshot(tenants)
    a_ids = {tenants.a_memo, tenants.a_record}

    listed = client.get("/v1/documents", headers=auth(b)).json()
    assert {d["id"] for d in listed["items"]} == {tenants.b_doc}
    for document_id in a_ids:
        theirs = client.get(f"/v1/documents/{document_id}", headers=auth(b))
        nowhere = client.get("/v1/documents/no-such-document", headers=auth(b))
        assert_error(theirs, 404, "not_found")
        assert_error(nowhere, 404, "not_found")
        # the same answer whether or not the id exists elsewhere
        assert theirs.json()["error"]["message"].replace(document_id, "ID") == nowhere.json()[
            "error"
        ]["message"].replace("no-such-document", "ID")

    for request in (
        {"method": "POST", "url": "/v1/search", "json": {"query": BLANKETS, "top_n": 10}},
        {"method": "GET", "url": "/v1/search", "params": {"query": BLANKETS, "top_n": 10}},
        {"method": "POST", "url": "/v1/search/similar", "json": {"text": "10,000 blankets"}},
        {"method": "POST", "url": "/v1/search", "json": {"query": "vault code", "top_n": 10}},
        {
            "method": "POST",
            "url": "/v1/search",
            "json": {"query": BLANKETS, "filters": {"document_id": sorted(a_ids)}},
        },
    ):
        response = client.request(**request, headers=auth(b))  # type: ignore[arg-type]
        assert response.status_code == 200, response.text
        ids = {r["document_id"] for r in response.json()["results"]}
        assert not ids & a_ids, request
    # the tenant comes only from the key: a tenant named anywhere else is ignored or refused
    sneaky = client.get(
        "/v1/documents",
        params={"tenant": "tenant-a"},
        headers={**auth(b), "X-Tenant": "tenant-a"},
    )
    assert_error(sneaky, 422, "unknown_parameter")  # not even a parameter it takes
    headed = client.get("/v1/documents", headers={**auth(b), "X-Tenant": "tenant-a"})
    assert {d["id"] for d in headed.json()["items"]} == {tenants.b_doc}
    assert_error(
        client.post("/v1/search", json={"query": BLANKETS, "tenant": "tenant-a"}, headers=auth(b)),
        422,
        "validation_error",
    )
    assert_error(
        client.post(
            "/v1/search",
            json={"query": BLANKETS, "filters": {"tenant": "tenant-a"}},
            headers=auth(b),
        ),
        422,
        "invalid_filter",
    )
    stats = client.get("/v1/stats", headers=auth(b)).json()
    assert stats["tenant"] == "tenant-b" and stats["documents"] == 1

    assert_error(client.get(f"/v1/jobs/{tenants.a_job}", headers=auth(b)), 404, "not_found")
    assert tenants.a_job not in {j["id"] for j in client.get("/v1/jobs", headers=auth(b)).json()}
    b_keys = client.get("/v1/keys", headers=auth(b)).json()
    assert {k["tenant"] for k in b_keys} == {"tenant-b"}
    assert a_snapshot(tenants) == before


def test_b_changes_nothing_of_a(tenants: Tenants) -> None:
    client, b = tenants.api.client, tenants.b
    before = a_snapshot(tenants)
    for document_id in (tenants.a_memo, tenants.a_record):
        assert_error(
            client.delete(f"/v1/documents/{document_id}", headers=auth(b)), 404, "not_found"
        )
        replaced = client.put(
            f"/v1/documents/{document_id}",
            files={"file": ("takeover.txt", b"Tenant B wrote this over tenant A's document.")},
            headers=auth(b),
        )
        assert_error(replaced, 404, "not_found")
    assert_error(client.delete(f"/v1/keys/{tenants.a_key_id}", headers=auth(b)), 404, "not_found")
    # records with A's ids land in B's own tenant, never in A's
    records = client.post(
        "/v1/records",
        json={"records": [{"fact_id": tenants.a_record, "subject": "Vault", "code": "0000"}]},
        headers=auth(b),
    )
    job = wait_for_job(client, records.json()["job_id"], b)
    assert job["documents"][0]["outcome"] == "added"
    assert client.get(f"/v1/documents/{tenants.a_record}", headers=auth(b)).status_code == 200
    assert client.delete(f"/v1/documents/{tenants.a_record}", headers=auth(b)).status_code == 200

    # the same file (so the same document id) uploaded by B is B's own copy: not a
    # duplicate of A's, and removing it leaves A's alone
    job = wait_for_job(client, upload(tenants.api, b, DOCS / "pdf_fake-memo.pdf"), b)
    assert job["documents"][0]["outcome"] == "added"
    assert job["documents"][0]["document_id"] == tenants.a_memo
    assert client.delete(f"/v1/documents/{tenants.a_memo}", headers=auth(b)).status_code == 200
    with PageServer("<html><body><p>Tenant B's page about the harbour.</p></body></html>") as page:
        imported = client.post(
            "/v1/documents/url", json={"urls": [page.url], "source": "web"}, headers=auth(b)
        )
        job = wait_for_job(client, imported.json()["job_id"], b)
    assert job["documents"][0]["outcome"] == "added"
    new_key = client.post("/v1/keys", json={"permissions": ["read"]}, headers=auth(b)).json()
    assert new_key["key"]["tenant"] == "tenant-b"
    assert client.get("/v1/stats", headers=auth(new_key["token"])).json()["tenant"] == "tenant-b"

    after = a_snapshot(tenants)
    assert after == before
    assert after["first"] == tenants.a_memo and after["stats"]["documents"] == 2
    a_record = client.get(f"/v1/documents/{tenants.a_record}", headers=auth(tenants.a)).json()
    assert "4711" in a_record["chunks"][0]["content"]
    assert client.get("/v1/stats", headers=auth(tenants.a)).status_code == 200  # A's key works
