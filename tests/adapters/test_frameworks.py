"""The framework adapters, through each framework's own retriever and tool interfaces, over
a local knowledge base and over a real ``flexmatch serve`` on 127.0.0.1 (via ``Client``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexmatch import Client, ConfigError, KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.testing import FakeLLMServer
from tests.conftest import write_config
from tests.serving import KB_CONFIG, served_kb

KEYS = "# Keys and locks\n\nThe spare key to the boathouse hangs behind the blue door.\n"
FERRY = "# Ferry\n\n## Sundays\n\nThe last ferry to Gull Island leaves at 21:40 on Sundays.\n"
QUESTION = "Where is the spare key to the boathouse?"
# a heading with one short line (a chunk too short to stand alone), its answer in the next
OFFICE = (
    "# Harbour office hours\n\nThe office hours follow.\n\n## Summer\n\n"
    + " ".join(
        f"In summer week {i} the office opens at 08:00 and closes at 18:00." for i in range(40)
    )
    + "\n"
)
METADATA = {
    "chunk_id",
    "document_id",
    "source",
    "uri",
    "title",
    "heading_path",
    "location",
    "cite",
    "score",
    "matched_text",
    "qualifying_text",
    "metadata",
    "hop",
    "found_by",
    "context",
}

KB = KnowledgeBase | Client


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("notes")
    (folder / "keys.md").write_text(KEYS, encoding="utf-8")
    (folder / "ferry.md").write_text(FERRY, encoding="utf-8")
    return folder


@pytest.fixture(scope="module", params=["local", "served"])
def kb(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    embedder: OnnxEmbedder,
    notes: Path,
) -> Iterator[KB]:
    """The notes ingested into a local knowledge base, or into a served one reached
    through ``Client``."""
    folder = tmp_path_factory.mktemp(request.param) / "kb"
    if request.param == "local":
        write_config(folder, KB_CONFIG)
        with KnowledgeBase.open(folder, embedder=embedder, env={}) as local:
            assert local.ingest([notes]).added == 2
            yield local
    else:
        with served_kb(folder) as served, Client(served.url, served.key("agents")) as remote:
            assert remote.ingest([notes]).added == 2
            yield remote


def test_langchain_retriever_sync_and_async(kb: KB) -> None:
    from flexmatch.adapters.frameworks.langchain import FlexMatchRetriever

    retriever = FlexMatchRetriever(kb=kb, top_n=2)
    docs = retriever.invoke(QUESTION)
    assert len(docs) == 2 and "blue door" in docs[0].page_content
    first = docs[0].metadata
    assert set(first) == METADATA
    assert first["title"] == "Keys and locks" and first["heading_path"] == ["Keys and locks"]
    assert docs[0].id == first["chunk_id"] and first["chunk_id"].startswith(first["document_id"])
    assert "keys.md" in first["cite"] and first["location"]["line_start"] >= 1
    assert first["score"] > docs[1].metadata["score"] and first["matched_text"]
    json.dumps(first)  # plain JSON values: any LangChain store or tracer can keep them

    later = asyncio.run(retriever.ainvoke("When does the last ferry leave on Sundays?"))
    assert "21:40" in later[0].page_content
    assert later[0].metadata["heading_path"] == ["Ferry", "Sundays"]


def test_langchain_tool_shows_citations_and_carries_documents(kb: KB) -> None:
    from flexmatch.adapters.frameworks.langchain import retriever_tool

    tool = retriever_tool(kb, top_n=1)
    assert tool.name == "search_knowledge" and "query" in tool.args
    text = tool.invoke({"query": QUESTION})
    assert text.startswith("[keys.md") and "blue door" in text
    call = {"args": {"query": QUESTION}, "id": "call-1", "name": tool.name, "type": "tool_call"}
    message = asyncio.run(tool.ainvoke(call))
    assert message.tool_call_id == "call-1" and "blue door" in message.content
    (document,) = message.artifact
    assert set(document.metadata) == METADATA


def test_llamaindex_retriever_and_retriever_tool(kb: KB) -> None:
    from llama_index.core.schema import MetadataMode

    from flexmatch.adapters.frameworks.llamaindex import FlexMatchRetriever, retriever_tool

    retriever = FlexMatchRetriever(kb, top_n=2)
    nodes = retriever.retrieve(QUESTION)
    assert len(nodes) == 2 and "blue door" in nodes[0].node.get_content()
    assert nodes[0].score == nodes[0].node.metadata["score"]
    assert set(nodes[0].node.metadata) == METADATA
    assert nodes[0].node.node_id == nodes[0].node.metadata["chunk_id"]
    shown = nodes[0].node.get_content(MetadataMode.LLM)
    assert "cite: " in shown and "chunk_id" not in shown and "score" not in shown

    later = asyncio.run(retriever.aretrieve("last ferry on Sundays"))
    assert "21:40" in later[0].node.get_content()

    tool = retriever_tool(kb, top_n=1)
    assert tool.metadata.name == "search_knowledge"
    output = tool.call(QUESTION)
    assert "blue door" in output.content and "Keys and locks" in output.content
    assert output.raw_output[0].node.metadata["source"] == "default"
    again = asyncio.run(tool.acall(QUESTION))
    assert "blue door" in again.content


def test_openai_agents_tool_in_an_agent_run(kb: KB, llm_server: FakeLLMServer) -> None:
    """A real ``Runner`` run: the model (the fake server, answering as a tool-using model
    does) calls the tool, and answers quoting what it returned."""
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
    from agents.items import ToolCallOutputItem
    from openai import AsyncOpenAI

    from flexmatch.adapters.frameworks.openai_agents import search_tool

    model = OpenAIChatCompletionsModel(
        model="fake-model",
        openai_client=AsyncOpenAI(base_url=llm_server.base_url, api_key="test-key"),
    )
    agent = Agent(name="harbour", instructions="Answer from the knowledge base.", model=model)
    agent.tools = [search_tool(kb, top_n=2)]
    result = asyncio.run(Runner.run(agent, QUESTION, run_config=RunConfig(tracing_disabled=True)))
    assert "blue door" in result.final_output
    (output,) = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    found = json.loads(output)
    assert found["query"] == QUESTION and len(found["results"]) == 2
    first = found["results"][0]
    shown = METADATA - {"qualifying_text", "metadata", "hop", "found_by", "context"}
    assert shown <= set(first) | {"location"}
    assert "keys.md" in first["cite"] and first["heading_path"] == ["Keys and locks"]


def test_openai_agents_tool_reports_mistakes_to_the_model(kb: KB) -> None:
    from agents import FunctionTool
    from agents.tool_context import ToolContext

    from flexmatch.adapters.frameworks.openai_agents import search_tool

    def call(tool: FunctionTool, arguments: dict[str, object]) -> dict[str, object]:
        text = json.dumps(arguments)
        context = ToolContext(
            context=None, tool_name=tool.name, tool_call_id="c1", tool_arguments=text
        )
        return json.loads(asyncio.run(tool.on_invoke_tool(context, text)))

    tool = search_tool(kb)
    assert "non-empty" in str(call(tool, {"query": "  "})["error"])
    assert "from 1 to 20" in str(call(tool, {"query": QUESTION, "top_n": 50})["error"])
    assert call(tool, {"query": QUESTION, "source": "default"})["results"]
    assert call(tool, {"query": QUESTION, "source": "web"})["results"] == []
    unfit = search_tool(kb, filters={"colour": 1.5})  # the knowledge base's FilterError
    assert "colour" in str(call(unfit, {"query": QUESTION})["error"])
    # depth and expand, as the MCP tool takes them; a wrong one is the model's to fix
    deep = call(tool, {"query": QUESTION, "top_n": 2, "depth": "deep", "expand": "section"})
    assert len(deep["results"]) == 2  # type: ignore[arg-type]
    assert "depth" in str(call(tool, {"query": QUESTION, "depth": "deeper"}).get("error", ""))


def test_a_tenant_is_refused_for_a_served_knowledge_base(kb: KB) -> None:
    from flexmatch.adapters.frameworks.langchain import FlexMatchRetriever

    if isinstance(kb, Client):  # refused when the retriever is made, not on its first use
        with pytest.raises(ConfigError, match="API key"):
            FlexMatchRetriever(kb=kb, tenant="default", top_n=1)
    else:
        assert FlexMatchRetriever(kb=kb, tenant="default", top_n=1).invoke(QUESTION)


def test_deep_search_and_expansion_through_the_retrievers(kb: KB, tmp_path: Path) -> None:
    """``depth`` and ``expand`` as ``kb.query`` takes them: a deep search's results say
    their hop, an expanded one reads its neighbours; a bad option fails when the
    retriever is made."""
    from flexmatch import DepthError
    from flexmatch.adapters.frameworks import langchain, llamaindex

    deep = langchain.FlexMatchRetriever(kb=kb, top_n=2, depth="deep").invoke(QUESTION)
    assert "blue door" in deep[0].page_content and deep[0].metadata["hop"] == 1
    assert all(d.metadata["hop"] in (1, 2) for d in deep)
    fast = langchain.FlexMatchRetriever(kb=kb, top_n=2).invoke(QUESTION)
    assert fast[0].metadata["hop"] is None and fast[0].metadata["context"] is None

    office = tmp_path / "office.md"
    office.write_text(OFFICE, encoding="utf-8")
    assert kb.ingest([office]).added == 1
    asked = "What are the harbour office hours?"
    expected = kb.query(asked, top_n=1, expand="neighbours")
    assert expected[0].context is not None and "08:00" in expected[0].context.text
    (node,) = llamaindex.FlexMatchRetriever(kb, top_n=1, expand="neighbours").retrieve(asked)
    context = node.node.metadata["context"]
    assert context["kind"] == "neighbours" and "text" not in context
    assert node.node.get_content() == expected[0].context.text  # what the agent reads
    assert node.node.metadata["cite"] == expected[0].context.cite

    with pytest.raises(DepthError):
        llamaindex.FlexMatchRetriever(kb, depth="deeper")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        langchain.FlexMatchRetriever(kb=kb, expand="chapter")  # type: ignore[arg-type]
