"""The HTTP API against a real uvicorn server on 127.0.0.1: every endpoint, happy path and
errors, with real files from the sample documents."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service.keys import MAX_ACTIVE_KEYS
from tests.adapters.http.harness import Api, running_api, upload
from tests.adapters.http.servers import PageServer, assert_error, auth, wait_for_job
from tests.conftest import DOCS

MEMO = DOCS / "pdf_fake-memo.pdf"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Api]:
    with running_api(tmp_path_factory.mktemp("http") / "kb", embedder) as running:
        running.key("rw", "acme", "read,write")
        running.key("read", "acme", "read")
        running.key("write", "acme", "write")
        running.key("admin", "acme", "admin")
        yield running


@pytest.fixture(scope="module")
def memo_id(api: Api) -> str:
    """The fake memo, uploaded with metadata next to a file that cannot be ingested."""
    token = api.tokens["rw"]
    job_id = upload(api, token, MEMO, ("broken.bin", b"\x00\x01"), metadata='{"team": "ops"}')
    job = wait_for_job(api.client, job_id, token)
    assert job["status"] == "done" and job["total"] == 2 and job["processed"] == 2
    memo, broken = job["documents"]
    assert memo["input"] == "pdf_fake-memo.pdf" and memo["outcome"] == "added"
    assert memo["document_id"] and memo["chunks"] >= 1 and memo["matching_texts"] >= 1
    assert broken["outcome"] == "failed" and "broken.bin: unsupported file type" in broken["error"]
    assert job["counts"]["added"] == 1 and job["counts"]["failed"] == 1
    return str(memo["document_id"])


def search(api: Api, query: str, token: str | None = None, **body: object) -> dict:
    response = api.client.post(
        "/v1/search", json={"query": query, **body}, headers=auth(token or api.tokens["rw"])
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


# -- health and schema ---------------------------------------------------------------------
def test_health_ready_and_openapi(api: Api) -> None:
    assert api.client.get("/health").json() == {"status": "ok", "checks": {}}
    deadline = time.monotonic() + 30
    while (ready := api.client.get("/health/ready")).status_code != 200:
        assert ready.status_code == 503 and ready.json()["error"]["code"] == "not_ready"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert ready.json() == {
        "status": "ready",
        "checks": {"store": True, "models": True, "state": True},
    }
    schema = api.client.get("/openapi.json").json()
    for path in (
        "/v1/documents",
        "/v1/documents/url",
        "/v1/records",
        "/v1/documents/{document_id}",
        "/v1/jobs/{job_id}",
        "/v1/search",
        "/v1/search/similar",
        "/v1/stats",
        "/health/ready",
    ):
        assert path in schema["paths"], path
    assert set(schema["paths"]["/v1/documents/{document_id}"]) == {"get", "put", "delete"}
    assert {"HTTPBearer", "APIKeyHeader"} <= set(schema["components"]["securitySchemes"])
    # no endpoint takes a tenant from the request: not as a parameter, not in a body
    for operations in schema["paths"].values():
        for operation in operations.values():
            names = {p["name"].lower() for p in operation.get("parameters", [])}
            assert not any("tenant" in name for name in names), operation["operationId"]
    for name, component in schema["components"]["schemas"].items():
        if name.endswith("Request") or name.startswith("Body_"):
            assert "tenant" not in json.dumps(component.get("properties", {})), name


# -- ingest → job → searchable ----------------------------------------------------------------
def test_upload_job_then_searchable(api: Api, memo_id: str) -> None:
    data = search(api, "How many blankets were delivered?", top_n=3)
    first = data["results"][0]
    assert first["document_id"] == memo_id and first["rank"] == 1
    assert "10,000 blankets" in first["content"] and first["uri"] == "upload:pdf_fake-memo.pdf"
    assert first["location"] == {"page": 1} and first["cite"] == "pdf_fake-memo.pdf p. 1"
    assert first["matched_text"] and first["qualifying_text"]
    assert first["metadata"]["team"] == "ops"
    assert data["explain"] is False and data["query"] == "How many blankets were delivered?"
    assert "explanation" not in first and "variants" not in data
    assert data["total"] == len(data["results"]) and data["took_ms"] >= 0
    explained = search(api, "How many blankets were delivered?", top_n=1, explain=True)
    assert explained["explain"] is True and explained["results"][0]["document_id"] == memo_id
    assert explained["variants"] == ["How many blankets were delivered?"]
    signals = explained["results"][0]["explanation"]
    assert signals["dense"] > 0 and signals["rerank"] is not None


def test_get_document_with_chunks(api: Api, memo_id: str) -> None:
    response = api.client.get(f"/v1/documents/{memo_id}", headers=auth(api.tokens["read"]))
    assert response.status_code == 200
    detail = response.json()
    assert detail["document"]["id"] == memo_id and detail["document"]["status"] == "complete"
    assert detail["document"]["metadata"]["team"] == "ops"
    chunk = detail["chunks"][0]
    assert "20,000 bottles of water" in chunk["content"]
    assert chunk["location"]["page"] == 1
    assert chunk["matching_texts"] and chunk["qualifying_text"]
    assert_error(
        api.client.get("/v1/documents/nope", headers=auth(api.tokens["read"])), 404, "not_found"
    )


def test_bulk_upload_list_filters_and_pagination(api: Api, memo_id: str) -> None:
    token = api.tokens["rw"]
    paths = [DOCS / "codeblock.md", DOCS / "fake.docx", DOCS / "fake-html.html"]
    job = wait_for_job(api.client, upload(api, token, *paths), token)
    assert [d["outcome"] for d in job["documents"]] == ["added"] * 3
    again = wait_for_job(api.client, upload(api, token, paths[0]), token)
    assert again["documents"][0]["outcome"] == "unchanged"
    assert again["documents"][0]["document_id"] == job["documents"][0]["document_id"]

    listed = api.client.get("/v1/documents", headers=auth(token)).json()
    assert listed["total"] >= 4 and memo_id in {d["id"] for d in listed["items"]}
    page = api.client.get(
        "/v1/documents", params={"limit": 2, "offset": 1}, headers=auth(token)
    ).json()
    assert page["limit"] == 2 and page["offset"] == 1 and len(page["items"]) == 2
    assert [d["id"] for d in page["items"]] == [d["id"] for d in listed["items"][1:3]]
    only = api.client.get("/v1/documents", params={"source": "facts"}, headers=auth(token)).json()
    assert all(d["source"] == "facts" for d in only["items"])
    complete = api.client.get(
        "/v1/documents", params={"status": "complete"}, headers=auth(token)
    ).json()
    assert complete["total"] == listed["total"]
    bad = api.client.get("/v1/documents", params={"limit": 0}, headers=auth(token))
    assert_error(bad, 422, "validation_error")

    jobs = api.client.get("/v1/jobs", headers=auth(token)).json()
    assert jobs[0]["id"] == again["id"] and {j["id"] for j in jobs} >= {job["id"]}


def test_search_get_similar_filters_and_stats(api: Api, memo_id: str) -> None:
    token = api.tokens["read"]
    got = api.client.get(
        "/v1/search",
        params={"query": "How many blankets were delivered?", "top_n": 1, "source": "default"},
        headers=auth(token),
    )
    assert got.status_code == 200 and got.json()["results"][0]["document_id"] == memo_id

    similar = api.client.post(
        "/v1/search/similar",
        json={"text": "There were 10,000 blankets delivered", "top_n": 2},
        headers=auth(token),
    )
    assert similar.status_code == 200
    assert similar.json()["results"][0]["document_id"] == memo_id

    only_ops = search(api, "delivered", token, filters={"metadata.team": "ops"})
    assert {r["document_id"] for r in only_ops["results"]} == {memo_id}
    by_id = search(api, "fenced code block", token, filters={"document_id": [memo_id]})
    assert {r["document_id"] for r in by_id["results"]} == {memo_id}

    for bad in ({"tenant": "other"}, {"record": "document"}, {"version": "x"}):
        response = api.client.post(
            "/v1/search", json={"query": "x", "filters": bad}, headers=auth(token)
        )
        assert_error(response, 422, "invalid_filter")

    stats = api.client.get("/v1/stats", headers=auth(token)).json()
    assert stats["tenant"] == "acme" and stats["documents"] >= 1 and stats["chunks"] >= 1
    assert stats["store_bytes"] is None  # the store's size counts every tenant
    admin = api.client.get("/v1/stats", headers=auth(api.tokens["admin"])).json()
    assert admin["documents"] == stats["documents"] and admin["store_bytes"] > 0


def test_records_job(api: Api) -> None:
    token = api.tokens["rw"]
    records = [
        {"fact_id": "f1", "subject": "Ann", "prefers": "green tea", "allergies": ["nuts"]},
        {"subject": "Bob", "prefers": "black coffee"},
        {},
    ]
    response = api.client.post(
        "/v1/records", json={"records": records, "source": "facts"}, headers=auth(token)
    )
    assert response.status_code == 202 and response.headers["location"].startswith("/v1/jobs/")
    job = wait_for_job(api.client, response.json()["job_id"], token)
    outcomes = [(d["outcome"], d["document_id"]) for d in job["documents"]]
    assert outcomes[0] == ("added", "f1") and outcomes[1][0] == "added"
    assert outcomes[2][0] == "failed" and job["documents"][2]["error"]
    found = search(api, "What does Ann like to drink?", filters={"source": "facts"})
    assert found["results"][0]["document_id"] == "f1"

    default_source = api.client.post(
        "/v1/records",
        json={"records": [{"fact_id": "people/bob", "likes": "sailing"}]},
        headers=auth(token),
    )
    assert default_source.status_code == 202  # the one records source is picked
    wait_for_job(api.client, default_source.json()["job_id"], token)
    with_slash = api.client.get("/v1/documents/people/bob", headers=auth(token))
    assert with_slash.status_code == 200 and with_slash.json()["document"]["id"] == "people/bob"
    not_records = api.client.post(
        "/v1/records", json={"records": [{"a": 1}], "source": "default"}, headers=auth(token)
    )
    assert_error(not_records, 422, "not_a_records_source")
    empty = api.client.post("/v1/records", json={"records": []}, headers=auth(token))
    assert_error(empty, 422, "validation_error")
    not_objects = api.client.post("/v1/records", json={"records": ["text"]}, headers=auth(token))
    assert_error(not_objects, 422, "validation_error")


def test_url_import_applies_web_safety_rules(api: Api) -> None:
    token = api.tokens["rw"]
    html = (
        "<html><head><title>Harbour opening hours</title></head><body><main>"
        "<h1>Opening hours</h1><p>The harbour office opens at 7 am and closes at 4 pm.</p>"
        "</main></body></html>"
    )
    with PageServer(html) as page:
        refused = api.client.post(
            "/v1/documents/url",
            json={"urls": [page.url, "ftp://example.com/file"]},
            headers=auth(token),
        )
        assert refused.status_code == 202
        job = wait_for_job(api.client, refused.json()["job_id"], token)
        loopback, ftp = job["documents"]
        assert loopback["outcome"] == "failed" and "loopback" in loopback["error"]
        assert ftp["outcome"] == "failed" and "only http and https" in ftp["error"]

        allowed = api.client.post(
            "/v1/documents/url", json={"urls": [page.url], "source": "web"}, headers=auth(token)
        )
        job = wait_for_job(api.client, allowed.json()["job_id"], token)
    assert job["documents"][0]["outcome"] == "added", job
    page_id = job["documents"][0]["document_id"]
    found = search(api, "When does the harbour office open?", filters={"source": "web"})
    assert found["results"][0]["document_id"] == page_id
    unknown = api.client.post(
        "/v1/documents/url",
        json={"urls": ["https://example.com"], "source": "nope"},
        headers=auth(token),
    )
    assert_error(unknown, 422, "unknown_source")


def test_replace_document(api: Api, memo_id: str) -> None:
    token = api.tokens["rw"]
    job = wait_for_job(
        api.client,
        upload(api, token, ("depot.txt", b"The depot stores 300 tents and 40 stoves.")),
        token,
    )
    depot_id = job["documents"][0]["document_id"]
    new_text = b"The depot now stores 900 tents, 40 stoves and 12 generators."
    replaced = api.client.put(
        f"/v1/documents/{depot_id}",
        files={"file": ("depot.txt", new_text)},
        data={"metadata": '{"revision": 2}'},
        headers=auth(token),
    )
    assert replaced.status_code == 200, replaced.text
    body = replaced.json()
    assert body["outcome"]["outcome"] == "changed" and body["document"]["id"] == depot_id
    assert body["document"]["metadata"]["revision"] == 2
    detail = api.client.get(f"/v1/documents/{depot_id}", headers=auth(token)).json()
    assert "12 generators" in detail["chunks"][0]["content"]
    found = search(api, "How many tents does the depot store?", top_n=1)
    assert "900 tents" in found["results"][0]["content"]

    nothing = api.client.put(f"/v1/documents/{depot_id}", headers=auth(token))
    assert_error(nothing, 422, "content_required")
    bad_metadata = api.client.put(
        f"/v1/documents/{depot_id}",
        files={"file": ("depot.txt", new_text)},
        data={"metadata": "[1, 2]"},
        headers=auth(token),
    )
    assert_error(bad_metadata, 422, "invalid_metadata")
    unknown = api.client.put(
        "/v1/documents/nope", files={"file": ("x.txt", b"some text")}, headers=auth(token)
    )
    assert_error(unknown, 404, "not_found")
    same_as_memo = api.client.put(
        f"/v1/documents/{depot_id}",
        files={"file": ("memo-copy.pdf", MEMO.read_bytes())},
        headers=auth(token),
    )
    assert_error(same_as_memo, 409, "duplicate_content")
    unparsable = api.client.put(
        f"/v1/documents/{depot_id}", files={"file": ("x.bin", b"\x00")}, headers=auth(token)
    )
    assert_error(unparsable, 422, "ingest_failed")
    after = api.client.get(f"/v1/documents/{depot_id}", headers=auth(token)).json()
    assert "12 generators" in after["chunks"][0]["content"]  # atomic: the old version stays


def test_delete_document(api: Api) -> None:
    token = api.tokens["rw"]
    job = wait_for_job(
        api.client,
        upload(api, token, ("lighthouse.md", b"# Lighthouse\n\nThe lighthouse lamp is 8 m tall.")),
        token,
    )
    doc_id = job["documents"][0]["document_id"]
    deleted = api.client.delete(f"/v1/documents/{doc_id}", headers=auth(token))
    assert deleted.status_code == 200 and deleted.json() == {"id": doc_id, "deleted": True}
    assert_error(api.client.get(f"/v1/documents/{doc_id}", headers=auth(token)), 404, "not_found")
    again = api.client.delete(f"/v1/documents/{doc_id}", headers=auth(token))
    assert_error(again, 404, "not_found")
    found = search(api, "How tall is the lighthouse lamp?")
    assert doc_id not in {r["document_id"] for r in found["results"]}


def test_search_cache_is_invalidated_by_writes(api: Api) -> None:
    token = api.tokens["rw"]
    query = {"query": "How many kayaks are in the boathouse?", "top_n": 3}

    def ask() -> tuple[str, set[str]]:
        response = api.client.post("/v1/search", json=query, headers=auth(token))
        assert response.status_code == 200
        return response.headers["x-cache"], {r["document_id"] for r in response.json()["results"]}

    assert ask()[0] == "miss"
    cached, before = ask()
    assert cached == "hit"
    other_tenant = api.key("cache-other", "other-co", "read")
    response = api.client.post("/v1/search", json=query, headers=auth(other_tenant))
    assert response.headers["x-cache"] == "miss" and response.json()["results"] == []

    job = wait_for_job(
        api.client,
        upload(api, token, ("boathouse.txt", b"The boathouse holds 14 kayaks and 3 canoes.")),
        token,
    )
    boathouse = job["documents"][0]["document_id"]
    state, after = ask()
    assert state == "miss" and boathouse in after and boathouse not in before
    assert ask()[0] == "hit"

    api.client.delete(f"/v1/documents/{boathouse}", headers=auth(token))
    state, gone = ask()
    assert state == "miss" and boathouse not in gone


# -- permissions and keys ----------------------------------------------------------------
def test_permissions(api: Api, memo_id: str) -> None:
    reader, writer = api.tokens["read"], api.tokens["write"]
    refused = api.client.post(
        "/v1/documents", files={"files": ("a.txt", b"text")}, headers=auth(reader)
    )
    assert_error(refused, 403, "forbidden")
    assert_error(
        api.client.delete(f"/v1/documents/{memo_id}", headers=auth(reader)), 403, "forbidden"
    )
    assert_error(
        api.client.post("/v1/search", json={"query": "x"}, headers=auth(writer)), 403, "forbidden"
    )
    job_id = upload(api, writer, ("w.txt", b"Written by a write-only key."))
    assert wait_for_job(api.client, job_id, writer)["status"] == "done"  # may follow its job
    assert_error(api.client.get("/v1/keys", headers=auth(reader)), 403, "forbidden")

    assert_error(api.client.get("/v1/stats"), 401, "unauthorized")
    assert api.client.get("/v1/stats").headers["www-authenticate"] == "Bearer"
    assert_error(
        api.client.get("/v1/stats", headers=auth("fm_000000000000_x")), 401, "unauthorized"
    )
    assert_error(api.client.get("/v1/stats", headers=auth("not-a-key")), 401, "unauthorized")
    tampered = reader[:-2] + ("AA" if not reader.endswith("AA") else "BB")
    assert_error(api.client.get("/v1/stats", headers=auth(tampered)), 401, "unauthorized")
    by_header = api.client.get("/v1/stats", headers={"X-API-Key": reader})
    assert by_header.status_code == 200


def test_admin_keys_api_and_revocation(api: Api) -> None:
    admin = api.tokens["admin"]
    created = api.client.post(
        "/v1/keys", json={"permissions": ["read"], "name": "robot"}, headers=auth(admin)
    )
    assert created.status_code == 201
    token, key = created.json()["token"], created.json()["key"]
    assert key["tenant"] == "acme" and key["permissions"] == ["read"] and token.startswith("fm_")
    assert api.client.get("/v1/stats", headers=auth(token)).status_code == 200
    listed = api.client.get("/v1/keys", headers=auth(admin)).json()
    assert key["id"] in {k["id"] for k in listed} and all(k["tenant"] == "acme" for k in listed)
    assert "token" not in json.dumps(listed) and "secret" not in json.dumps(listed)

    revoked = api.client.delete(f"/v1/keys/{key['id']}", headers=auth(admin))
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True
    assert_error(api.client.get("/v1/stats", headers=auth(token)), 401, "unauthorized")
    # revoked from outside the server (``flexmatch keys revoke``): refused at once
    extra = api.key("outside", "acme", "read")
    assert api.client.get("/v1/stats", headers=auth(extra)).status_code == 200
    assert api.keys.revoke(extra.split("_")[1])
    assert_error(api.client.get("/v1/stats", headers=auth(extra)), 401, "unauthorized")
    bad = api.client.post("/v1/keys", json={"permissions": ["root"]}, headers=auth(admin))
    assert_error(bad, 422, "validation_error")
    assert_error(api.client.delete("/v1/keys/ffffffffffff", headers=auth(admin)), 404, "not_found")


def test_key_names_and_count_are_bounded(api: Api) -> None:
    admin = api.key("capped admin", "capped", "admin")

    def create(name: str = "") -> httpx.Response:
        body = {"permissions": ["read"], "name": name}
        return api.client.post("/v1/keys", json=body, headers=auth(admin))

    long = create("n" * 1_000_000)
    assert_error(long, 422, "validation_error")
    assert "name" in long.json()["error"]["message"] and "200" in long.json()["error"]["message"]
    escape = create("\x1b]0;pwn\x07")
    assert_error(escape, 422, "invalid_key_request")
    assert "U+001B" in escape.json()["error"]["message"]
    names = [k["name"] for k in api.client.get("/v1/keys", headers=auth(admin)).json()]
    assert names == ["capped admin"]  # neither was stored

    # the admin key is the first of the tenant's keys; the rest in one transaction (fast)
    with api.keys.database.transaction() as db:
        for number in range(MAX_ACTIVE_KEYS - 1):
            db.execute(
                "INSERT INTO api_keys (id, secret_sha256, tenant, permissions, name, created_at)"
                " VALUES (:id, '-', 'capped', 'read', '', '2026-01-01T00:00:00+00:00')",
                {"id": f"{number:012x}"},
            )
    full = create("one too many")
    assert_error(full, 422, "invalid_key_request")
    assert "already has 1000 active keys" in full.json()["error"]["message"]
    spare = api.keys.list("capped")[-1]
    assert api.client.delete(f"/v1/keys/{spare.id}", headers=auth(admin)).status_code == 200
    assert create("after a revoke").status_code == 201


# -- errors -----------------------------------------------------------------------------------
def test_errors_are_one_json_shape(api: Api) -> None:
    token = api.tokens["rw"]
    assert_error(api.client.get("/nowhere"), 404, "not_found")
    assert_error(api.client.get("/v1/nowhere", headers=auth(token)), 404, "not_found")
    assert_error(api.client.delete("/health"), 405, "method_not_allowed")
    assert_error(api.client.get("/v1/jobs/unknown", headers=auth(token)), 404, "not_found")
    body = assert_error(
        api.client.post("/v1/search", json={"query": "x", "top_n": 0}, headers=auth(token)),
        422,
        "validation_error",
    )
    assert body["error"]["details"][0]["loc"] == ["body", "top_n"]
    broken = api.client.post(
        "/v1/search",
        content=b"{not json",
        headers={**auth(token), "Content-Type": "application/json"},
    )
    assert_error(broken, 422, "validation_error")
    unknown_field = api.client.post(
        "/v1/search", json={"query": "x", "tenant": "other"}, headers=auth(token)
    )
    assert_error(unknown_field, 422, "validation_error")
    assert_error(
        api.client.post("/v1/search", json={"query": "   "}, headers=auth(token)),
        422,
        "empty_query",
    )
    assert_error(
        api.client.post("/v1/search", json={"query": "x" * 2_001}, headers=auth(token)),
        422,
        "query_too_long",
    )
    assert_error(
        api.client.post("/v1/search/similar", json={"text": "x" * 2_001}, headers=auth(token)),
        422,
        "text_too_long",
    )
    assert_error(
        api.client.post(
            "/v1/documents",
            files={"files": ("a.txt", b"x")},
            data={"source": "nope"},
            headers=auth(token),
        ),
        422,
        "unknown_source",
    )
    assert_error(
        api.client.post(
            "/v1/documents",
            files={"files": ("a.txt", b"x")},
            data={"metadata": "{oops"},
            headers=auth(token),
        ),
        422,
        "invalid_metadata",
    )
    assert_error(
        api.client.post("/v1/documents", data={"source": "default"}, headers=auth(token)),
        422,
        "validation_error",
    )
