"""``GET /metrics`` and the access log, against a real uvicorn server on 127.0.0.1 over a
knowledge base whose LLM chains call the fake LLM server: every counter is read from a
real scrape, before and after the requests that should move it."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flexmatch import KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore
from flexmatch.testing.fake_llm import FakeLLMServer
from tests.adapters.http.servers import UvicornThread, assert_error, auth, wait_for_job
from tests.conftest import DOCS, llm_config, write_config

MEMO = DOCS / "pdf_fake-memo.pdf"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class Served:
    client: httpx.Client
    llm: FakeLLMServer
    tokens: dict[str, str]


METRICS_TOKEN = "operator-metrics-token-0123456789"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Served]:
    kb_dir = tmp_path_factory.mktemp("metrics") / "kb"
    with FakeLLMServer() as llm:
        write_config(kb_dir, llm_config(llm, f"service:\n  metrics_token: {METRICS_TOKEN}\n"))
        kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
        keys = KeyStore.for_kb(kb_dir)
        tokens = {
            name: keys.create("acme", permissions, name)[1]
            for name, permissions in (("admin", "admin"), ("rw", "read,write"))
        }
        app = create_app(kb, limits=Limits(rate_per_second=1_000, burst=1_000))
        try:
            with UvicornThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as c:
                yield Served(c, llm, tokens)
        finally:
            kb.close()


def scrape(served: Served) -> Samples:
    response = served.client.get("/metrics", headers=auth(METRICS_TOKEN))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def search(served: Served, query: str, **body: object) -> httpx.Response:
    headers = auth(served.tokens["rw"])
    response = served.client.post("/v1/search", json={"query": query, **body}, headers=headers)
    assert response.status_code == 200, response.text
    return response


def test_only_the_operator_token_reads_the_metrics(served: Served) -> None:
    """They add up every tenant's traffic: no tenant's key, not even an admin key, reads
    them; the operator's ``service.metrics_token`` does."""
    assert_error(served.client.get("/metrics"), 401, "unauthorized")
    for token in (served.tokens["rw"], served.tokens["admin"], METRICS_TOKEN[:-1]):
        refused = served.client.get("/metrics", headers=auth(token))
        assert_error(refused, 401, "unauthorized")
        assert "service.metrics_token" in refused.text
    samples = scrape(served)
    # the families are there before anything happened, so a dashboard has no holes
    for name in ("flexmatch_llm_calls_total", "flexmatch_llm_cost_usd_total"):
        assert (name, ()) in samples
    assert ("flexmatch_jobs", (("status", "running"),)) in samples


def test_requests_count_by_route_template_and_status(served: Served) -> None:
    before = scrape(served)
    missing = "/v1/documents/no-such-document"
    found = served.client.get(missing, headers=auth(served.tokens["rw"]))
    assert_error(found, 404, "not_found")
    assert_error(served.client.post("/v1/search", json={"query": "x"}), 401, "unauthorized")
    assert served.client.get("/no/such/page").status_code == 404
    assert served.client.get("/health").status_code == 200
    assert served.client.request("BREW", "/health").status_code == 405
    after = scrape(served)
    requests = "flexmatch_http_requests_total"
    document = "/v1/documents/{document_id:path}"
    assert moved(before, after, requests, method="GET", route=document, status="404") == 1
    assert moved(before, after, requests, method="POST", route="/v1/search", status="401") == 1
    assert moved(before, after, requests, method="GET", route="<unmatched>", status="404") == 1
    assert moved(before, after, requests, method="GET", route="/health", status="200") == 1
    assert moved(before, after, requests, method="other", route="/health", status="405") == 1
    # the raw path of a request is never a label: the number of series stays bounded
    assert not any(missing in str(labels) for _, labels in after)
    seconds = "flexmatch_http_request_duration_seconds_count"
    assert moved(before, after, seconds, method="GET", route=document) == 1


def test_a_search_counts_its_stages_and_the_caches(served: Served) -> None:
    query = "What does the memo say about the budget?"
    before = scrape(served)
    assert search(served, query).headers["X-Cache"] == "miss"
    first = scrape(served)
    stages = "flexmatch_search_stage_seconds_count"
    for stage in ("transform", "embed", "search", "rerank", "format"):
        assert moved(before, first, stages, stage=stage) == 1, stage
    cache = "flexmatch_search_cache_lookups_total"
    assert moved(before, first, cache, result="miss") == 1
    assert moved(before, first, "flexmatch_llm_calls_total") >= 1  # the query rewrite
    assert moved(before, first, "flexmatch_llm_tokens_total", kind="prompt") > 0
    assert search(served, query).headers["X-Cache"] == "hit"
    # another cache key (explained) for the same query: the LLM cache answers the rewrite
    assert search(served, query, explain=True).headers["X-Cache"] == "miss"
    after = scrape(served)
    assert moved(first, after, cache, result="hit") == 1
    assert moved(first, after, cache, result="miss") == 1
    assert moved(first, after, "flexmatch_llm_cache_hits_total") >= 1
    assert moved(first, after, "flexmatch_llm_calls_total") == 0
    assert moved(first, after, stages, stage="embed") == 1  # the cached answer ran no stage


def test_an_ingest_counts_documents_chunks_failures_and_jobs(served: Served) -> None:
    before = scrape(served)
    served.llm.latency = 0.3  # a job long enough to be seen running
    try:
        files = [("files", (MEMO.name, MEMO.read_bytes())), ("files", ("broken.bin", b"\0\1"))]
        accepted = served.client.post(
            "/v1/documents", files=files, headers=auth(served.tokens["rw"])
        )
        assert accepted.status_code == 202, accepted.text
        deadline = time.monotonic() + 30
        while value(scrape(served), "flexmatch_jobs", status="running") != 1:
            assert time.monotonic() < deadline, "the job was never seen running"
            time.sleep(0.05)
    finally:
        served.llm.latency = 0.0
    job = wait_for_job(served.client, accepted.json()["job_id"], served.tokens["rw"])
    assert job["status"] == "done" and job["counts"]["added"] == 1, job
    after = scrape(served)
    documents = "flexmatch_ingest_documents_total"
    assert moved(before, after, documents, outcome="added") == 1
    assert moved(before, after, documents, outcome="failed") == 1
    assert moved(before, after, "flexmatch_ingest_chunks_total") == job["counts"]["chunks"] > 0
    assert moved(before, after, "flexmatch_jobs_finished_total", status="done") == 1
    assert value(after, "flexmatch_jobs", status="running") == 0
    assert value(after, "flexmatch_jobs", status="queued") == 0
    # the questions written for the memo's chunks were LLM calls, with their tokens
    assert moved(before, after, "flexmatch_llm_calls_total") >= job["counts"]["chunks"]
    assert moved(before, after, "flexmatch_llm_tokens_total", kind="completion") > 0
    # a document replaced in place (PUT) counts as well
    memo = next(d for d in job["documents"] if d["outcome"] == "added")
    replaced = served.client.put(
        f"/v1/documents/{memo['document_id']}",
        data={"metadata": '{"team": "ops"}'},
        headers=auth(served.tokens["rw"]),
    )
    assert replaced.status_code == 200, replaced.text
    outcome = replaced.json()["outcome"]["outcome"]
    assert moved(after, scrape(served), documents, outcome=outcome) == 1


def test_each_request_writes_one_access_line_without_secrets(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="flexmatch.http.access")
    token = served.tokens["rw"]
    served.client.get("/v1/documents/secret-looking-id?x=1", headers=auth(token))
    served.client.get("/v1/stats", headers={"X-API-Key": token})
    served.client.get("/v1/stats", headers=auth("fm_not_a_key"))
    deadline = time.monotonic() + 10  # a line is written once its response is sent
    while len(lines := [r for r in caplog.records if r.name == "flexmatch.http.access"]) < 3:
        assert time.monotonic() < deadline, lines
        time.sleep(0.02)
    assert [(r.method, r.route, r.status, r.tenant) for r in lines] == [  # type: ignore[attr-defined]
        ("GET", "/v1/documents/{document_id:path}", 422, "acme"),  # x=1: an unknown parameter
        ("GET", "/v1/stats", 200, "acme"),
        ("GET", "/v1/stats", 401, "-"),
    ]
    text = lines[1].getMessage()
    assert text.startswith("GET /v1/stats 200 ") and " ms tenant=acme client=127.0.0.1" in text
    everything = "\n".join(r.getMessage() for r in lines)
    assert token not in everything and "fm_not_a_key" not in everything
    assert "secret-looking-id" not in everything and "x=1" not in everything


def test_a_console_search_counts_its_stages_and_its_line_names_the_tenant(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="flexmatch.http.access")
    url = str(served.client.base_url)
    with httpx.Client(base_url=url, timeout=60) as browser:
        form = re.search(r'name="csrf" value="([^"]+)"', browser.get("/console/signin").text)
        assert form
        signed = browser.post(
            "/console/signin",
            data={"csrf": form.group(1), "api_key": served.tokens["rw"], "next": "/console/"},
            headers={"Origin": url, "Sec-Fetch-Site": "same-origin"},
        )
        assert signed.status_code == 303, signed.text
        before = scrape(served)
        page = browser.get("/console/search", params={"q": "What is in the memo?"})
        assert page.status_code == 200, page.text
    after = scrape(served)
    stages = "flexmatch_search_stage_seconds_count"
    for stage in ("transform", "embed", "search", "rerank", "format"):
        assert moved(before, after, stages, stage=stage) == 1, stage
    deadline = time.monotonic() + 10
    while not [r for r in caplog.records if getattr(r, "route", "") == "/console/search"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    (line,) = [r for r in caplog.records if getattr(r, "route", "") == "/console/search"]
    assert (line.status, line.tenant) == (200, "acme")  # type: ignore[attr-defined]


def test_the_root_url_leads_to_the_console(served: Served) -> None:
    response = served.client.get("/")
    assert response.status_code == 307 and response.headers["location"] == "/console/"
    assert served.client.get("/", follow_redirects=True).status_code == 200
