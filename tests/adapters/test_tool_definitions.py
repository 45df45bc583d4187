"""The agent tool and the MCP server offer the same tools: one argument model each
(``flexmatch.tools``) gives both their schemas and their argument checks, so they cannot
drift apart."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from flexmatch import TOOL_ARGUMENTS, KnowledgeBase
from flexmatch.adapters.agent import ALL_TOOLS, handle_tool_call
from flexmatch.adapters.mcp import build_server
from flexmatch.testing import HashEmbedder
from tests.adapters.http.harness import KB_CONFIG
from tests.conftest import write_config


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    write_config(tmp_path / "kb", KB_CONFIG)  # with a records source: every tool offered
    with KnowledgeBase.open(tmp_path / "kb", embedder=HashEmbedder(), env={}) as opened:
        yield opened


def mcp_session(kb: KnowledgeBase, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list]:
    """The server's tools as listed, and each call's (is_error, text)."""

    async def session() -> tuple[Any, list]:
        async with Client(build_server(kb)) as client:
            listed = (await client.list_tools()).tools
            done = [await client.call_tool(name, arguments) for name, arguments in calls]
        return listed, [(r.is_error, r.content[0].text) for r in done]

    return asyncio.run(session())


def test_mcp_and_agent_publish_the_same_schemas(kb: KnowledgeBase) -> None:
    listed, _ = mcp_session(kb, [])
    mcp_tools = {tool.name: tool for tool in listed}
    assert list(mcp_tools) == list(TOOL_ARGUMENTS)
    agent_tools = {tool["function"]["name"]: tool["function"] for tool in ALL_TOOLS}
    assert list(agent_tools) == list(mcp_tools)  # every tool, served by both
    for name, model in TOOL_ARGUMENTS.items():
        schema = mcp_tools[name].input_schema
        assert schema == model.parameters(), name  # the SDK's own, from the signature
        assert (mcp_tools[name].description or "").startswith(model.tool_description)
        if name in agent_tools:
            parameters = agent_tools[name]["parameters"]
            assert schema["properties"] == parameters["properties"], name
            assert schema["required"] == parameters["required"], name
            assert schema["additionalProperties"] is parameters["additionalProperties"] is False
            assert agent_tools[name]["description"] == model.tool_description


BAD_CALLS = [
    ("search_knowledge", {}),
    ("search_knowledge", {"query": " "}),
    ("search_knowledge", {"query": "x" * 2_001}),
    ("search_knowledge", {"query": "x", "top_n": 21}),
    ("search_knowledge", {"query": "x", "filters": "not an object"}),
    ("ingest_url", {"url": "ftp://example.org/file"}),
    ("add_record", {"record": {}}),
    ("add_record", {"record": ["a list"]}),
    ("search_knowledge", {"query": "x", "tenant": "b"}),  # refused, never dropped
    ("search_knowledge", {"query": "x", "top_k": 3, "as_user": "user:eve"}),
]


def test_a_bad_argument_is_said_the_same_by_both(kb: KnowledgeBase) -> None:
    _, results = mcp_session(kb, BAD_CALLS)
    for (name, arguments), (is_error, said) in zip(BAD_CALLS, results, strict=True):
        agent = json.loads(asyncio.run(handle_tool_call(kb, name, json.dumps(arguments))))
        unknown = set(arguments) - set(TOOL_ARGUMENTS[name].model_fields)
        start = (
            f"{name} does not take the argument" if unknown else f"invalid arguments for {name}: "
        )
        assert is_error and said.startswith(start), said
        assert agent == {"error": said}, (name, arguments)


def test_the_http_apis_default_query_limit_is_the_tools() -> None:
    from flexmatch import MAX_QUERY_CHARS
    from flexmatch.adapters.http.limits import Limits

    assert Limits().max_query_chars == MAX_QUERY_CHARS
