"""The MCP server through the official SDK's client: the real ``flexmatch mcp`` command
over stdio, and the streamable HTTP transport on a real uvicorn server (the command
over HTTP, with keys, is ``test_mcp_http.py``)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from flexmatch import KnowledgeBase
from flexmatch.adapters.mcp import READ_ONLY_TOOLS, WRITE_TOOLS, build_server
from flexmatch.engine.embedders import OnnxEmbedder
from tests.adapters.http.harness import KB_CONFIG
from tests.adapters.http.servers import UvicornThread
from tests.conftest import DOCS, write_config

FLEXMATCH = Path(sys.executable).parent / "flexmatch"
QUESTION = "How many blankets were delivered?"
# the sources say what they hold; the knowledge base too, and one tool is re-described
DESCRIBED = (
    KB_CONFIG.replace(
        "  default: {}", "  default: {description: 'Memos and reports, as files.'}"
    ).replace("    type: records\n", "    type: records\n    description: Facts agents learned.\n")
    + "mcp:\n  description: The relief operation's memos.\n"
    + "  tools: {get_document: Read one stored document whole.}\n"
)


def make_kb(folder: Path, embedder: OnnxEmbedder, config: str = DESCRIBED) -> Path:
    """A knowledge base holding the fake memo (tenant "default"), closed again."""
    write_config(folder, config)
    with KnowledgeBase.open(folder, embedder=embedder, env={}) as kb:
        report = kb.ingest([DOCS / "pdf_fake-memo.pdf"])
    assert report.added == 1
    return folder


def text_of(result: object) -> str:
    content = result.content  # type: ignore[attr-defined]
    return str(content[0].text)


@pytest.fixture(scope="module")
def stdio_kb(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Path:
    return make_kb(tmp_path_factory.mktemp("mcp-stdio") / "kb", embedder)


def stdio(kb: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(FLEXMATCH),
        args=["mcp", "--kb", str(kb), *extra],
        # the code under test: a worktree's, when PYTHONPATH names one
        env={
            "HF_HUB_OFFLINE": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
        },
    )


def one_line_error(result: object) -> str:
    """The text of a failed call: flagged ``is_error``, one line, no pydantic links."""
    text = text_of(result)
    assert result.is_error, text  # type: ignore[attr-defined]
    assert "\n" not in text and "errors.pydantic.dev" not in text and "Traceback" not in text
    return text


def test_stdio_session_lists_tools_and_searches(stdio_kb: Path) -> None:
    async def session() -> None:
        async with Client(stdio(stdio_kb), read_timeout_seconds=60) as client:
            assert client.instructions is not None
            assert client.instructions.endswith(
                "This knowledge base: The relief operation's memos."
            )
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {*READ_ONLY_TOOLS, *WRITE_TOOLS}
            assert tools["search_knowledge"].input_schema["required"] == ["query"]
            assert tools["search_knowledge"].annotations.read_only_hint is True
            # what the knowledge base holds, source by source, is in the descriptions
            search = tools["search_knowledge"].description or ""
            assert "The knowledge base: The relief operation's memos." in search
            assert "- default (files): Memos and reports, as files." in search
            assert "- facts (records): Facts agents learned." in search and "- web (web)" in search
            record = tools["add_record"].description or ""
            assert (
                "- facts (records): Facts agents learned." in record and "default (" not in record
            )
            assert "Records sources (default: facts):" in record
            assert tools["get_document"].description == "Read one stored document whole."

            found = await client.call_tool("search_knowledge", {"query": QUESTION, "top_n": 2})
            assert not found.is_error
            result = json.loads(text_of(found))
            assert result["query"] == QUESTION
            assert "10,000 blankets" in result["results"][0]["content"]

            listed = json.loads(text_of(await client.call_tool("list_documents", {})))
            assert listed["total"] == 1
            document_id = listed["documents"][0]["id"]
            shown = json.loads(
                text_of(await client.call_tool("get_document", {"document_id": document_id}))
            )
            assert shown["chunks"][0]["matching_texts"]

            # what a result gives is what the reading tools take
            hit = result["results"][0]
            opened = await client.call_tool(
                "read_document",
                {"document_id": hit["document_id"], "chunk": hit["chunk_index"], "after": 1},
            )
            assert json.loads(text_of(opened))["chunks"][0]["content"] == hit["content"]
            outline = json.loads(
                text_of(await client.call_tool("outline_document", {"document_id": document_id}))
            )
            assert outline["chunks"] == len(shown["chunks"])
            page = await client.call_tool(
                "read_document", {"document_id": document_id, "pages": [1, 1]}
            )
            assert json.loads(text_of(page))["chunks"][0]["cite"].endswith("p. 1")
            found = json.loads(
                text_of(await client.call_tool("grep_knowledge", {"pattern": "blankets"}))
            )
            assert found["hits"] and found["hits"][0]["cite"].startswith("pdf_fake-memo.pdf p.")
            backwards = await client.call_tool(
                "read_document", {"document_id": document_id, "pages": [2, 1]}
            )
            assert one_line_error(backwards).endswith(
                "'pages' must be a first and a last number, [first, last], from 1"
            )

            missing = await client.call_tool("get_document", {"document_id": "nope"})
            assert "no document 'nope'" in one_line_error(missing)
            refused = await client.call_tool("ingest_url", {"url": "http://127.0.0.1:9/x"})
            assert "http://127.0.0.1:9/x" in one_line_error(refused)
            assert "loopback" in text_of(refused)
            bad = await client.call_tool("search_knowledge", {"query": QUESTION, "top_n": 0})
            assert one_line_error(bad).endswith(
                "invalid arguments for search_knowledge: 'top_n' must be a whole number "
                "from 1 to 20"
            )
            wrong = await client.call_tool("add_record", {"record": {"a": 1}, "source": "web"})
            assert "source 'web' is not of type 'records'" in one_line_error(wrong)
            added = await client.call_tool(
                "add_record", {"record": {"fact_id": "f9", "subject": "Gate", "code": "1234"}}
            )
            assert json.loads(text_of(added))["status"] == "added"

    asyncio.run(session())


def test_stdio_read_only_drops_write_tools(stdio_kb: Path) -> None:
    async def session() -> None:
        async with Client(stdio(stdio_kb, "--read-only"), read_timeout_seconds=60) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == set(READ_ONLY_TOOLS)
            refused = await client.call_tool("add_record", {"record": {"a": 1}})
            assert refused.is_error

    asyncio.run(session())


def test_no_records_source_no_add_record(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    """add_record is offered only where it can work: a knowledge base with a records
    source; the descriptions then name the sources with no description as bare names."""
    write_config(tmp_path / "kb", "sources:\n  default: {}\n  pages: {type: web}\n")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:

        async def session() -> None:
            async with Client(build_server(kb)) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert set(tools) == {*READ_ONLY_TOOLS, "ingest_url"}
                search = tools["search_knowledge"].description or ""
                assert search.endswith("- default (files)\n- pages (web)")
                refused = await client.call_tool("add_record", {"record": {"a": 1}})
                assert refused.is_error and "add_record" in text_of(refused)

        asyncio.run(session())


def test_streamable_http_and_tenant_scope(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> None:
    folder = make_kb(tmp_path_factory.mktemp("mcp-http") / "kb", embedder)
    kb = KnowledgeBase.open(folder, embedder=embedder, env={})
    try:
        app = build_server(kb).streamable_http_app()
        with UvicornThread(app) as server:

            async def over_http() -> None:
                async with Client(f"{server.url}/mcp", read_timeout_seconds=60) as client:
                    found = await client.call_tool("search_knowledge", {"query": QUESTION})
                    assert "10,000 blankets" in text_of(found)
                    bad = await client.call_tool(
                        "search_knowledge", {"query": QUESTION, "top_n": 0}
                    )
                    assert bad.is_error

            asyncio.run(over_http())

        async def other_tenant() -> None:
            async with Client(build_server(kb, tenant="someone-else")) as client:
                found = json.loads(
                    text_of(await client.call_tool("search_knowledge", {"query": QUESTION}))
                )
                assert found["results"] == []
                listed = json.loads(text_of(await client.call_tool("list_documents", {})))
                assert listed["total"] == 0

        asyncio.run(other_tenant())
    finally:
        kb.close()


def test_filters_are_the_same_vocabulary_as_everywhere(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> None:
    from flexmatch.engine.points import search_filters
    from flexmatch.errors import FilterError

    folder = make_kb(tmp_path_factory.mktemp("mcp-filters") / "kb", embedder)
    kb = KnowledgeBase.open(folder, embedder=embedder, env={})
    try:

        async def session() -> None:
            async with Client(build_server(kb)) as client:
                kept = await client.call_tool(
                    "search_knowledge", {"query": QUESTION, "filters": {"source": "default"}}
                )
                assert "10,000 blankets" in text_of(kept)
                none = await client.call_tool(
                    "search_knowledge", {"query": QUESTION, "filters": {"tags": "nothing-has"}}
                )
                assert json.loads(text_of(none))["results"] == []
                bad = await client.call_tool(
                    "search_knowledge", {"query": QUESTION, "filters": {"uri": "x"}}
                )
                with pytest.raises(FilterError) as expected:
                    search_filters({"uri": "x"})
                assert bad.is_error and str(expected.value) in text_of(bad)

        asyncio.run(session())
    finally:
        kb.close()


def test_an_unknown_tool_in_the_mcp_config_is_named(tmp_path: Path) -> None:
    from flexmatch import ConfigError, load_config

    write_config(tmp_path, "mcp:\n  tools: {search: Find things.}\n")
    with pytest.raises(ConfigError, match=r"unknown MCP tool 'search' \(tools: search_knowledge,"):
        load_config(tmp_path)
