"""MCP over HTTP takes the REST API's keys: tenant and permissions come from the key, a
call without one is refused, and no non-loopback bind is served without keys."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from flexmatch import ConfigError, KnowledgeBase
from flexmatch.adapters.mcp import build_server, run
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore
from tests.adapters.http.harness import KB_CONFIG
from tests.adapters.http.servers import UvicornThread, free_port
from tests.conftest import DOCS, write_config
from tests.conftest import run as run_cli

QUESTION = "How many blankets were delivered?"


def _text(result: object) -> str:
    return str(result.content[0].text)  # type: ignore[attr-defined]


def test_http_calls_act_as_their_key(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    write_config(tmp_path / "kb", KB_CONFIG)
    kb = KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={})
    kb.ingest([DOCS / "pdf_fake-memo.pdf"], tenant="acme")
    keys = KeyStore.for_kb(kb.path)
    _, acme = keys.create("acme", "read,write")
    _, acme_reader = keys.create("acme", "read")
    _, other = keys.create("other", "read,write")
    _, revoked = keys.create("acme", "read")
    _, acme_giver = keys.create("acme", "read,feedback")
    _, other_giver = keys.create("other", "read,feedback")
    memo = kb.list_documents(tenant="acme")[0].id
    chunk_id = kb.get_document(memo, tenant="acme").chunks[0].id
    keys.revoke(revoked.split("_")[1])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = build_server(kb, keys=keys, url=url).streamable_http_app()

    async def call(token: str | None, tool: str, arguments: dict) -> tuple[bool, str]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        client = create_mcp_http_client(headers=headers)
        transport = streamable_http_client(f"{url}/mcp", http_client=client)
        async with Client(transport, read_timeout_seconds=60) as session:
            result = await session.call_tool(tool, arguments)
            return bool(result.is_error), _text(result)

    async def tools(token: str) -> dict[str, dict]:
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        transport = streamable_http_client(f"{url}/mcp", http_client=client)
        async with Client(transport, read_timeout_seconds=60) as session:
            listed = await session.list_tools()
            return {tool.name: tool.input_schema for tool in listed.tools}

    try:
        with UvicornThread(app, port=port):
            # no key, a wrong key, a revoked key: refused before any tool runs
            for token in (None, "fm_000000000000_wrong", revoked):
                response = httpx.post(
                    f"{url}/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    headers={"Authorization": f"Bearer {token}"} if token else {},
                )
                assert response.status_code == 401, response.text
            error, found = asyncio.run(call(acme, "search_knowledge", {"query": QUESTION}))
            assert not error and "10,000 blankets" in found
            error, found = asyncio.run(call(other, "search_knowledge", {"query": QUESTION}))
            assert not error and json.loads(found)["results"] == []  # another tenant's data
            error, listed = asyncio.run(call(other, "list_documents", {}))
            assert json.loads(listed)["total"] == 0
            # grep never crosses into another tenant's text either
            error, found = asyncio.run(call(acme, "grep_knowledge", {"pattern": "blankets"}))
            assert not error and json.loads(found)["hits"]
            error, found = asyncio.run(call(other, "grep_knowledge", {"pattern": "blankets"}))
            assert not error and json.loads(found) == {
                "pattern": "blankets",
                "regex": False,
                "hits": [],
                "documents": 0,
                "truncated": False,
            }
            error, text = asyncio.run(
                call(acme_reader, "add_record", {"record": {"fact_id": "r1", "subject": "x"}})
            )
            assert error and "does not have the 'write' permission" in text
            # a key is shown only the tools it may call, each closed to other arguments
            read_tools = {
                "search_knowledge",
                "list_documents",
                "get_document",
                "outline_document",
                "read_document",
                "grep_knowledge",
            }
            assert set(asyncio.run(tools(acme_reader))) == read_tools
            writer_tools = asyncio.run(tools(acme))
            assert set(writer_tools) == read_tools | {"ingest_url", "add_record"}
            assert all(schema["additionalProperties"] is False for schema in writer_tools.values())
            # feedback takes its own permission, and never reaches another tenant's chunk
            assert set(asyncio.run(tools(acme_giver))) == read_tools | {"give_feedback"}
            marked = {"query": QUESTION, "chunk_ids": [chunk_id]}
            error, text = asyncio.run(call(acme_reader, "give_feedback", marked))
            assert error and "does not have the 'feedback' permission" in text
            error, text = asyncio.run(call(other_giver, "give_feedback", marked))
            assert not error and "no chunk" in json.loads(text)["feedback"][0]["error"]
            error, text = asyncio.run(call(acme_giver, "give_feedback", marked))
            assert not error and json.loads(text)["feedback"][0]["learned_id"]
            # an argument a tool does not take is refused by name, never dropped
            error, text = asyncio.run(
                call(other, "search_knowledge", {"query": QUESTION, "tenant": "acme"})
            )
            assert error and "search_knowledge does not take the argument 'tenant'" in text
            assert "the tenant is set by the server" in text and "blankets" not in text
            error, text = asyncio.run(call(acme, "list_documents", {"limit": 5, "top_k": 3}))
            assert error and "'top_k' (it takes: source, limit, offset)" in text
            error, text = asyncio.run(
                call(
                    acme, "add_record", {"record": {"fact_id": "gate", "subject": "Gate code 4711"}}
                )
            )
            assert not error and json.loads(text)["status"] == "added"
        assert kb.get_document("gate", tenant="acme").document.title == "Gate code 4711"
        assert kb.list_documents(tenant="other") == []
        learned = kb.get_document(memo, tenant="acme").chunks[0].matching_texts
        assert [m.text for m in learned if m.kind == "learned"] == [QUESTION]
    finally:
        kb.close()


def test_no_keys_only_on_loopback(tmp_path: Path) -> None:
    write_config(tmp_path, KB_CONFIG)  # a knowledge base: the refusal is about the address
    with pytest.raises(ConfigError, match=r"refusing to serve MCP on 0\.0\.0\.0 without API keys"):
        run(tmp_path, transport="http", host="0.0.0.0", auth=False)
    done = run_cli("mcp", "--kb", str(tmp_path), "--transport", "http", "--host", "::", "--no-auth")
    assert done.returncode == 2 and "without API keys" in done.stderr
