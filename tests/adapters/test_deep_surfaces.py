"""Deep search through every interface: HTTP (``/v1/search`` body field ``depth``), the
remote ``Client``, the MCP server's search tool (the official SDK client), the agent
tool and ``flexmatch query --depth``. Each goes through the engine's one deep path, so
each shows the bridge passage, its hop and the cost; each refuses a bad depth by name;
each keeps the reader's access on every hop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client as McpClient

from flexmatch import (
    ADMIN,
    Access,
    Client,
    DepthError,
    KnowledgeBase,
    Principal,
    SearchArguments,
)
from flexmatch.adapters.agent import handle_tool_call
from flexmatch.adapters.http import Limits, create_app
from flexmatch.adapters.mcp import build_server
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore
from flexmatch.testing import memory_knowledge_base
from tests.adapters.http.servers import UvicornThread
from tests.conftest import run, write_config
from tests.test_deep_search import BRIDGE, QUESTION, bridge_corpus

ALICE = Principal(user="alice")


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    with memory_knowledge_base(tmp_path_factory.mktemp("deep") / "kb") as kb:
        assert not kb.ingest_documents(bridge_corpus()).failed
        yield kb


@pytest.fixture(scope="module")
def served(kb: KnowledgeBase) -> Iterator[tuple[str, str]]:
    _, token = KeyStore.for_kb(kb.path).create("default", "read,write,admin", "deep")
    app = create_app(kb, limits=Limits(rate_per_second=1_000, burst=1_000))
    with UvicornThread(app) as server:
        yield server.url, token


def ids(results: list) -> list[str]:  # type: ignore[type-arg]
    return [r["document_id"] if isinstance(r, dict) else r.document_id for r in results]


def test_http_search_takes_a_depth(served: tuple[str, str]) -> None:
    url, token = served
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        body = {"query": QUESTION, "top_n": 5, "explain": True}
        fast = http.post("/v1/search", json=body).json()
        assert BRIDGE not in ids(fast["results"]) and "cost" not in fast
        deep = http.post("/v1/search", json={**body, "depth": "deep"})
        assert deep.status_code == 200 and deep.headers["X-Cache"] == "miss"
        answer = deep.json()
        assert BRIDGE in ids(answer["results"]) and answer["cost"]["hops"] == 2
        hops = {r["document_id"]: r["explanation"]["hop"] for r in answer["results"]}
        assert hops[BRIDGE] == 2 and hops["blue-train"] == 1
        # a deep answer is cached apart from the fast one
        again = http.post("/v1/search", json={**body, "depth": "deep"})
        assert again.headers["X-Cache"] == "hit" and ids(again.json()["results"]) == ids(
            answer["results"]
        )
        bad = http.post("/v1/search", json={**body, "depth": "deeper"})
        assert bad.status_code == 422
        assert bad.json()["error"]["code"] == "invalid_depth"
        assert "depth must be 'fast' or 'deep'" in bad.json()["error"]["message"]


def test_the_client_searches_deep_and_names_a_bad_depth(served: tuple[str, str]) -> None:
    url, token = served
    with Client(url, token) as client:
        answer = client.search(QUESTION, top_n=5, depth="deep")
        assert BRIDGE in ids(answer.results) and answer.cost is not None
        assert answer.cost.searches == 1 + len(answer.cost.follow_ups)
        bridge = next(r for r in answer.results if r.document_id == BRIDGE)
        assert bridge.signals.hop == 2 and bridge.signals.found_by
        assert BRIDGE in ids(asyncio.run(client.aquery(QUESTION, top_n=5, depth="deep")))
        assert client.search(QUESTION, top_n=5).cost is None
        with pytest.raises(DepthError, match="depth must be"):
            client.search(QUESTION, depth="deeper")  # type: ignore[arg-type]


def test_the_mcp_search_tool_takes_a_depth(kb: KnowledgeBase) -> None:
    async def session() -> None:
        async with McpClient(build_server(kb)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            schema = tools["search_knowledge"].input_schema["properties"]["depth"]
            assert schema["enum"] == ["fast", "deep"]
            found = await client.call_tool(
                "search_knowledge", {"query": QUESTION, "top_n": 5, "depth": "deep"}
            )
            result = json.loads(found.content[0].text)  # type: ignore[union-attr]
            assert BRIDGE in ids(result["results"]) and result["cost"]["hops"] == 2
            refused = await client.call_tool(
                "search_knowledge", {"query": QUESTION, "depth": "deeper"}
            )
            assert refused.is_error and "'depth'" in refused.content[0].text  # type: ignore[union-attr]

    asyncio.run(session())


def test_the_agent_tool_searches_deep_as_its_reader(kb: KnowledgeBase) -> None:
    arguments = {"query": QUESTION, "top_n": 5, "depth": "deep"}
    found = json.loads(
        asyncio.run(handle_tool_call(kb, "search_knowledge", arguments, principal=ADMIN))
    )
    assert BRIDGE in ids(found["results"]) and found["cost"]["searches"] >= 2
    assert SearchArguments.parameters()["properties"]["depth"]["enum"] == ["fast", "deep"]
    # hidden from alice: the album that names the label; her hops neither show it nor
    # follow it
    kb.set_access("blue-train", Access(principals=["user:bob"]))
    try:
        hers = json.loads(
            asyncio.run(handle_tool_call(kb, "search_knowledge", arguments, principal=ALICE))
        )
        assert "blue-train" not in ids(hers["results"])
        assert not any("Blue Note" in q for q in hers["cost"]["follow_ups"])
    finally:
        kb.set_access("blue-train", None)


def test_the_cli_searches_deep_and_refuses_a_bad_depth(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    folder = tmp_path / "kb"
    write_config(folder, "sources:\n  default: {}\n")
    with KnowledgeBase.open(folder, embedder=embedder, env={}) as kb:
        kb.ingest_documents(bridge_corpus())
    # ten results: the follow-ups' own finds rank below the question's first ones
    shown = run(
        "query", "--kb", str(folder), "--depth", "deep", "--explain", "--top-n", "10", QUESTION
    )
    assert shown.returncode == 0, shown.stderr
    assert "deep search: 2 hops" in shown.stdout and "hop 2 (" in shown.stdout
    printed = run("query", "--kb", str(folder), "--depth", "deep", "--json", QUESTION)
    assert json.loads(printed.stdout)["cost"]["hops"] == 2
    bad = run("query", "--kb", str(folder), "--depth", "deeper", QUESTION)
    assert bad.returncode != 0 and "depth must be 'fast' or 'deep'" in bad.stderr
    assert "Traceback" not in bad.stderr
