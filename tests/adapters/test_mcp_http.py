"""The real ``flexmatch mcp --transport http`` process through the official SDK's client
over streamable HTTP: it says where it listens, each key sees only the tools it may call,
and every failure is ``is_error`` with one line."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from flexmatch import KnowledgeBase
from flexmatch.adapters.mcp import READ_ONLY_TOOLS, TOOL_NEEDS
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore, key_identity
from tests.adapters.http.servers import free_port, new_key
from tests.adapters.test_mcp import QUESTION, make_kb, one_line_error, text_of
from tests.conftest import FLEXMATCH, run, stop, write_config

ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("FLEXMATCH_")},
    "HF_HUB_OFFLINE": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Path:
    return make_kb(tmp_path_factory.mktemp("mcp-http-process") / "kb", embedder)


@contextmanager
def mcp_process(kb: Path, *extra: str) -> Iterator[tuple[str, str]]:
    """``flexmatch mcp --transport http`` on a free port: its URL and its start-up line."""
    port = free_port()
    process = subprocess.Popen(
        [FLEXMATCH, "mcp", "--kb", kb, "--transport", "http", "--port", str(port), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert process.stderr is not None
        said = process.stderr.readline().strip()  # printed once the port is bound
        yield f"http://127.0.0.1:{port}/mcp", said
    finally:
        stop(process)


def over_http(url: str, token: str | None, work):  # type: ignore[no-untyped-def]
    """Run ``work(client)`` in a streamable HTTP connection carrying ``token``."""

    async def connected():  # type: ignore[no-untyped-def]
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = streamable_http_client(url, http_client=create_mcp_http_client(headers))
        async with Client(transport, read_timeout_seconds=60) as client:
            return await work(client)

    return asyncio.run(connected())


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


def test_keys_see_their_tools_and_failures_are_errors(kb: Path) -> None:
    reader = new_key(kb, "default", "read")
    writer = new_key(kb, "default", "read,write")
    with mcp_process(kb) as (url, said):
        assert said == (
            f"FlexMatch MCP server (streamable HTTP) on {url}; every call needs an API key "
            "('flexmatch keys create'). Ctrl+C stops it."
        )
        # a key sees the tools its permissions allow (feedback needs its own)
        readable = {name for name, need in TOOL_NEEDS.items() if need == "read"}
        assert "give_feedback" not in readable and "search_knowledge" in readable
        assert over_http(url, reader, tool_names) == readable
        written = {name for name, need in TOOL_NEEDS.items() if need in ("read", "write")}
        assert over_http(url, writer, tool_names) == written

        async def reader_calls(client: Client) -> None:
            found = await client.call_tool("search_knowledge", {"query": QUESTION})
            assert "10,000 blankets" in json.loads(text_of(found))["results"][0]["content"]
            refused = await client.call_tool("add_record", {"record": {"fact_id": "x"}})
            assert "does not have the 'write' permission" in one_line_error(refused)

        over_http(url, reader, reader_calls)

        async def writer_calls(client: Client) -> None:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "- facts (records): Facts agents learned." in (
                tools["search_knowledge"].description or ""
            )
            refused = await client.call_tool("ingest_url", {"url": "http://127.0.0.1:9/page"})
            assert "loopback" in one_line_error(refused)
            unknown = await client.call_tool("list_documents", {"source": "nope"})
            assert "unknown source 'nope'" in one_line_error(unknown)
            added = await client.call_tool(
                "add_record", {"record": {"fact_id": "gate", "subject": "Gate code 4711"}}
            )
            assert json.loads(text_of(added))["status"] == "added"
            opened = {"fact_id": "gate", "subject": "Gate code 4711", "access": "public"}
            widened = await client.call_tool("add_record", {"record": opened})
            assert "only an admin may set a document's access" in one_line_error(widened)

        over_http(url, writer, writer_calls)


def test_read_only_and_no_auth_say_so_on_start_up(kb: Path) -> None:
    with mcp_process(kb, "--no-auth", "--read-only", "--tenant", "acme") as (url, said):
        assert said == (
            f"FlexMatch MCP server (streamable HTTP) on {url}; no API keys: serving tenant "
            "'acme'; read-only. Ctrl+C stops it."
        )
        assert over_http(url, None, tool_names) == set(READ_ONLY_TOOLS)


def test_a_port_in_use_is_one_line(kb: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = run("mcp", "--kb", str(kb), "--transport", "http", "--port", str(port), env=ENV)
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}: address already in use" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_end_user_comes_from_the_host_never_the_model(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """A service key reads as the user the host application's headers name (two users,
    two answers); the model cannot name one (``as_user`` is no argument); without keys,
    ``--as``/``--group`` on the command line say who it reads as."""
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, "sources:\n  default: {}\n")
    memos = [
        {
            "id": "hr-pay",
            "title": "Pay",
            "text": "The orchard memo on hr pay.",
            "access": ["group:hr"],
        },
        {
            "id": "carol",
            "title": "Note",
            "text": "The orchard memo for carol.",
            "access": ["user:carol"],
        },
        {"id": "open", "title": "Open", "text": "The orchard memo for everyone."},
    ]
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as base:
        assert not base.add_records(memos).failed
    service = KeyStore.for_kb(kb_dir).create(
        "default", "read", identity=key_identity(service=True)
    )[1]

    def found(url: str, headers: dict[str, str], **arguments: object) -> tuple[bool, object]:
        async def connected():  # type: ignore[no-untyped-def]
            client = create_mcp_http_client(headers)
            transport = streamable_http_client(url, http_client=client)
            async with Client(transport, read_timeout_seconds=60) as session:
                result = await session.call_tool(
                    "search_knowledge", {"query": "orchard memo", "top_n": 10, **arguments}
                )
                text = text_of(result)
                if result.is_error:
                    return True, text
                return False, {r["document_id"] for r in json.loads(text)["results"]}

        return asyncio.run(connected())

    bearer = {"Authorization": f"Bearer {service}"}
    with mcp_process(kb_dir) as (url, _):
        alice = {**bearer, "X-FlexMatch-Principal": "user:alice", "X-FlexMatch-Groups": "hr"}
        carol = {**bearer, "X-FlexMatch-Principal": "user:carol"}
        assert found(url, alice) == (False, {"hr-pay", "open"})
        assert found(url, carol) == (False, {"carol", "open"})
        assert found(url, bearer) == (False, {"open"})  # naming nobody: never wider
        error, said = found(url, bearer, as_user="user:alice", groups=["hr"])
        assert error and "does not take the arguments 'as_user', 'groups'" in str(said)
    with mcp_process(kb_dir, "--no-auth", "--as", "user:carol") as (url, _):
        assert found(url, {}) == (False, {"carol", "open"})
    refused = run("mcp", "--kb", str(kb_dir), "--transport", "http", "--as", "user:carol", env=ENV)
    assert refused.returncode == 2 and "X-FlexMatch-Principal" in refused.stderr
    assert "Traceback" not in refused.stderr
