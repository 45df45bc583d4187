"""The query log end to end: searches through a real server (and, in its process, the
Python API) logged and counted in ``/metrics``; the log, the gaps and the golden
questions read over HTTP by admins only, one tenant at a time, and only what the reader
may read; and ``flexmatch gaps`` run as a user runs it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from flexmatch import Access, KnowledgeBase, Principal
from flexmatch.adapters.http import Limits, create_app
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore
from tests.adapters.http.servers import UvicornThread, auth
from tests.adapters.http.test_metrics import Samples, moved
from tests.conftest import run, write_config

METRICS_TOKEN = "operator-metrics-token-0123456789"
CONFIG = f"query_log:\n  enabled: true\nservice:\n  metrics_token: {METRICS_TOKEN}\n"
FERRY = "# Ferry timetable\n\nThe ferry to the island leaves the harbour at nine every morning."
PAYROLL = "# Payroll\n\nSalaries are paid on the last Friday of each month by bank transfer."
BOB = {"X-FlexMatch-Principal": "user:bob"}
ALICE = {"X-FlexMatch-Principal": "user:alice"}


@dataclass
class Served:
    client: httpx.Client
    kb: KnowledgeBase
    tokens: dict[str, str]
    ferry: str
    payroll: str

    def get(self, path: str, key: str = "admin", **headers: str) -> httpx.Response:
        return self.client.get(path, headers={**auth(self.tokens[key]), **headers})

    def search(self, query: str, key: str = "rw", **headers: str) -> None:
        response = self.client.post(
            "/v1/search", json={"query": query}, headers={**auth(self.tokens[key]), **headers}
        )
        assert response.status_code == 200, response.text


def write_docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ferry.md").write_text(FERRY)
    (folder / "payroll.md").write_text(PAYROLL)
    return folder


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("querylog-http")
    kb_dir = root / "kb"
    write_config(kb_dir, CONFIG)
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    for tenant in ("acme", "globex"):
        assert kb.ingest([write_docs(root / "docs")], tenant=tenant).failed == []
    ids = {r.title: r.id for r in kb.list_documents(tenant="acme")}
    kb.set_access(ids["Payroll"], Access(principals=["user:alice"]), tenant="acme")
    keys = KeyStore.for_kb(kb_dir)
    tokens = {
        name: keys.create(tenant, permissions, name)[1]
        for name, tenant, permissions in (
            ("admin", "acme", "admin"),
            ("rw", "acme", "read,write"),
            ("other", "globex", "admin"),
        )
    }
    app = create_app(kb, limits=Limits(rate_per_second=1_000, burst=1_000))
    try:
        with UvicornThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as c:
            yield Served(c, kb, tokens, ids["Ferry timetable"], ids["Payroll"])
    finally:
        kb.close()


@pytest.fixture(autouse=True)
def empty_log(served: Served) -> Iterator[None]:
    yield
    with served.kb.query_log.database.transaction() as db:
        db.execute("DELETE FROM query_log")
        db.execute("DELETE FROM query_feedback")


def scrape(served: Served) -> Samples:
    from prometheus_client.parser import text_string_to_metric_families

    response = served.client.get("/metrics", headers=auth(METRICS_TOKEN))
    assert response.status_code == 200, response.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def test_every_search_is_logged_even_a_cached_one_and_only_admins_read_it(
    served: Served,
) -> None:
    served.search("when does the ferry leave")
    served.search("when does the ferry leave")  # the same answer: the cache would serve it
    response = served.get("/v1/query-log")
    assert response.status_code == 200, response.text
    entries = response.json()
    assert [e["query"] for e in entries] == ["when does the ferry leave"] * 2
    assert entries[0]["results"][0]["document_id"] == served.ferry
    assert entries[0]["good"] is True and entries[0]["tenant"] == "acme"
    assert entries[0]["principal"] == "anonymous"  # an unbound key: no user, and no key
    assert not any(token in response.text for token in served.tokens.values())
    key_ids = [key.id for key in KeyStore.for_kb(served.kb.path).list("acme")]
    assert not any(key_id in response.text for key_id in key_ids)
    for path in ("/v1/query-log", "/v1/gaps", "/v1/query-log/feedback", "/v1/query-log/golden"):
        assert served.get(path, "rw").status_code == 403, path
        other = served.get(path, "other")
        assert other.status_code == 200, path
        assert "ferry" not in other.text, path  # another tenant's log is not theirs


def test_a_reader_named_by_an_admin_sees_no_document_they_may_not_read(served: Served) -> None:
    served.search("when are salaries paid", "admin", **ALICE)
    as_admin = served.get("/v1/query-log").json()
    assert as_admin[0]["results"][0]["document_id"] == served.payroll
    assert as_admin[0]["principal"] == "user:alice"
    served.kb.query_log.record_feedback(
        "when are salaries paid",
        as_admin[0]["results"][0]["chunk_id"],
        False,
        document_id=served.payroll,
        tenant="acme",
        principal=Principal(user="alice"),
    )
    for path in ("/v1/query-log", "/v1/gaps", "/v1/query-log/feedback", "/v1/query-log/golden"):
        response = served.get(path, **BOB)
        assert response.status_code == 200, response.text
        assert served.payroll not in response.text, path
    gaps = served.get("/v1/gaps", **BOB).json()
    assert [(g["example"], g["unhelpful"]) for g in gaps] == [("when are salaries paid", 0)]
    gaps = served.get("/v1/gaps").json()  # the admin's view: the unhelpful mark counts
    assert [(g["example"], g["unhelpful"]) for g in gaps] == [("when are salaries paid", 1)]


def test_gaps_and_golden_questions_over_http(served: Served) -> None:
    for query in ("recipe for chocolate cake", "how to bake a chocolate cake", "ferry times"):
        served.search(query)
    served.kb.query_log.record_feedback(
        "ferry times",
        f"{served.ferry}#0",
        True,
        document_id=served.ferry,
        tenant="acme",
        principal=None,
    )
    gaps = served.get("/v1/gaps").json()
    assert gaps[0]["count"] == 2 and gaps[0]["example"] in gaps[0]["queries"]
    assert set(gaps[0]["queries"]) == {"recipe for chocolate cake", "how to bake a chocolate cake"}
    golden = served.get("/v1/query-log/golden")
    assert golden.headers["content-type"].startswith("application/yaml")
    assert yaml.safe_load(golden.text) == [
        {"question": "ferry times", "expect": {"document": served.ferry}}
    ]


def test_queries_nothing_good_and_feedback_are_counted_on_every_path(served: Served) -> None:
    before = scrape(served)
    served.search("when does the ferry leave")
    served.search("quantum chromodynamics on a lattice")
    served.kb.search("quantum chromodynamics on a lattice", tenant="acme")  # Python, MCP: here
    log = served.kb.query_log
    log.record_feedback("q", "c#0", True, document_id="c", tenant="acme", principal=None)
    log.record_feedback("q", "c#0", False, document_id="c", tenant="acme", principal=None)
    log.record_feedback("q", "c#1", False, document_id="c", tenant="acme", principal=None)
    after = scrape(served)
    assert moved(before, after, "flexmatch_queries_total") == 3
    assert moved(before, after, "flexmatch_queries_nothing_good_total") == 2
    assert moved(before, after, "flexmatch_feedback_total", kind="helpful") == 1
    assert moved(before, after, "flexmatch_feedback_total", kind="unhelpful") == 2
    assert after[("flexmatch_store_bytes", ())] > 0  # the operator's view of the disk


def test_the_gaps_command(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write_config(kb, "query_log:\n  enabled: true\n")
    ingest = run("ingest", str(write_docs(tmp_path / "docs")), "--kb", str(kb))
    assert ingest.returncode == 0, ingest.stderr
    for query, who in (
        ("recipe for chocolate cake", []),
        ("how to bake a chocolate cake", []),
        ("when are salaries paid", ["--as", "user:alice"]),
    ):
        asked = run("query", query, "--kb", str(kb), *who)
        assert asked.returncode == 0, asked.stderr
    with KnowledgeBase.open(kb) as base:
        payroll = next(r.id for r in base.list_documents() if r.title == "Payroll")
        base.set_access(payroll, Access(principals=["user:alice"]))
        base.query_log.record_feedback(
            "pay day",
            f"{payroll}#0",
            True,
            document_id=payroll,
            tenant="default",
            principal=Principal(user="alice"),
        )
    shown = run("gaps", "--kb", str(kb))
    assert shown.returncode == 0, shown.stderr
    assert "recipe for chocolate cake" in shown.stdout or "how to bake" in shown.stdout
    golden = tmp_path / "golden.yaml"
    found = run("gaps", "--kb", str(kb), "--json", "--golden", str(golden))
    assert found.returncode == 0, found.stderr
    cake = [g for g in json.loads(found.stdout) if "chocolate" in g["example"]]
    assert len(cake) == 1 and cake[0]["count"] == 2
    assert yaml.safe_load(golden.read_text()) == [
        {"question": "pay day", "expect": {"document": payroll}}
    ]
    # bob may not read the payroll: its golden question and results are not his to see
    as_bob = run("gaps", "--kb", str(kb), "--json", "--as", "user:bob", "--golden", str(golden))
    assert as_bob.returncode == 0, as_bob.stderr
    assert payroll not in as_bob.stdout and yaml.safe_load(golden.read_text()) == []
    bad = run("gaps", "--kb", str(kb), "--limit", "0")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr


def test_the_client_mcp_and_the_agent_tool_are_logged_as_who_they_act_for(
    served: Served,
) -> None:
    from mcp import Client as McpClient

    from flexmatch import Client
    from flexmatch.adapters.agent import handle_tool_call
    from flexmatch.adapters.mcp import build_server

    url = str(served.client.base_url)
    with Client(url, served.tokens["admin"], principal=Principal(user="carol")) as client:
        client.search("ferry from the client")
    arguments = {"query": "ferry from the agent"}
    asyncio.run(
        handle_tool_call(
            served.kb, "search_knowledge", arguments, "acme", principal=Principal(user="dave")
        )
    )

    async def mcp_search() -> None:
        server = build_server(served.kb, tenant="acme", principal=Principal(user="erin"))
        async with McpClient(server) as mcp:
            await mcp.call_tool("search_knowledge", {"query": "ferry from mcp"})

    asyncio.run(mcp_search())
    logged = {e["query"]: e["principal"] for e in served.get("/v1/query-log").json()}
    assert logged == {
        "ferry from the client": "user:carol",
        "ferry from the agent": "user:dave",
        "ferry from mcp": "user:erin",
    }
