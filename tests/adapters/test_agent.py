"""The agent tool: definitions, the tool-call handler, the facts prompt, and the agent
loop (``run_agent``, the example, ``flexmatch agent-demo``) making real tool-call round
trips through litellm to the fake LLM server, which calls tools when offered them."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from flexmatch import KnowledgeBase, LLMError
from flexmatch.adapters.agent import (
    ADD_RECORD_TOOL,
    ALL_TOOLS,
    FEEDBACK_TOOL,
    GET_DOCUMENT_TOOL,
    GREP_KNOWLEDGE_TOOL,
    INGEST_URL_TOOL,
    LIST_DOCUMENTS_TOOL,
    NO_KEY,
    OUTLINE_DOCUMENT_TOOL,
    READ_DOCUMENT_TOOL,
    SEARCH_TOOL,
    facts_system_prompt,
    handle_tool_call,
    run_agent,
)
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.testing import FakeLLMServer
from tests.adapters.http.harness import KB_CONFIG
from tests.conftest import DOCS, REPO, run, write_config
from tests.testing.test_fake_llm_command import fake_llm_command

EXAMPLE = REPO / "examples" / "agent_loop.py"
QUESTION = "How many blankets were delivered?"


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Path:
    folder = tmp_path_factory.mktemp("agent") / "kb"
    write_config(folder, KB_CONFIG)
    with KnowledgeBase.open(folder, embedder=embedder, env={}) as kb:
        assert kb.ingest([DOCS / "pdf_fake-memo.pdf"]).added == 1
    return folder


@pytest.fixture
def kb(kb_dir: Path, embedder: OnnxEmbedder) -> Iterator[KnowledgeBase]:
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as opened:
        yield opened


def call(kb: KnowledgeBase, name: str, arguments: object, **options: object) -> dict:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return dict(json.loads(asyncio.run(handle_tool_call(kb, name, raw, **options))))  # type: ignore[arg-type]


def test_tool_definitions_are_openai_functions() -> None:
    assert ALL_TOOLS == [
        SEARCH_TOOL,
        LIST_DOCUMENTS_TOOL,
        GET_DOCUMENT_TOOL,
        OUTLINE_DOCUMENT_TOOL,
        READ_DOCUMENT_TOOL,
        GREP_KNOWLEDGE_TOOL,
        INGEST_URL_TOOL,
        ADD_RECORD_TOOL,
        FEEDBACK_TOOL,
    ]
    for tool in ALL_TOOLS:
        function = tool["function"]
        assert tool["type"] == "function" and function["description"]
        assert function["parameters"]["type"] == "object"
        assert set(function["parameters"]["required"]) <= set(function["parameters"]["properties"])
    assert SEARCH_TOOL["function"]["name"] == "search_knowledge"
    json.dumps(ALL_TOOLS)  # plain JSON, ready to send


def test_handle_tool_call_searches_and_reports_mistakes(kb: KnowledgeBase) -> None:
    found = call(kb, "search_knowledge", {"query": QUESTION, "top_n": 2})
    assert found["query"] == QUESTION and len(found["results"]) == 1
    assert "10,000 blankets" in found["results"][0]["content"]
    assert call(kb, "search_knowledge", {"query": QUESTION, "source": "facts"})["results"] == []
    other = call(kb, "search_knowledge", {"query": QUESTION}, tenant="someone-else")
    assert other["results"] == []
    for name, arguments, error in (
        ("search_knowledge", "{broken", "not valid JSON"),
        ("search_knowledge", "[1]", "must be a JSON object"),
        ("search_knowledge", {}, "'query' must be a non-empty string"),
        ("search_knowledge", {"query": "x", "top_n": 500}, "'top_n'"),
        ("search_knowledge", {"query": "x", "source": "nope"}, "unknown source"),
        ("search_knowledge", {"query": "x", "tenant": "b"}, "does not take the argument 'tenant'"),
        ("delete_everything", {}, "unknown tool 'delete_everything'"),
        ("ingest_url", {"url": "file:///etc/passwd"}, "http(s) URL"),
        ("add_record", {"record": "text"}, "non-empty JSON object"),
    ):
        result = call(kb, name, arguments)
        assert error in result["error"], (name, arguments, result)


def test_handle_tool_call_writes_unless_read_only(kb: KnowledgeBase) -> None:
    record = {"record": {"fact_id": "pref-1", "subject": "Ann", "prefers": "green tea"}}
    assert call(kb, "add_record", record, allow_writes=False)["error"].endswith("read-only")
    assert call(kb, "add_record", record) == {
        "input": "record",
        "status": "added",
        "detail": "stored as 1 chunk",
    }
    assert call(kb, "add_record", record)["status"] == "unchanged"
    found = call(kb, "search_knowledge", {"query": "What does Ann drink?", "source": "facts"})
    assert found["results"][0]["document_id"] == "pref-1"
    refused = call(kb, "ingest_url", {"url": "http://127.0.0.1:9/page"})
    assert refused["status"] == "failed" and "loopback" in refused["detail"]


def test_facts_system_prompt(kb: KnowledgeBase) -> None:
    results = kb.query(QUESTION, top_n=1)
    prompt = facts_system_prompt(kb, QUESTION, results)
    preamble, facts = prompt.split("\n\n", 1)
    assert "not instructions" in preamble
    assert facts.startswith("## Facts from the knowledge base")
    assert "10,000 blankets" in facts and "pdf_fake-memo.pdf" in facts
    bare = facts_system_prompt(kb, QUESTION, [], preamble="")
    assert bare.startswith("## Facts") and "No stored knowledge matches the query." in bare
    assert QUESTION not in bare  # the query is not echoed where it would not be fenced


def test_example_agent_loop_makes_a_tool_call_round_trip(
    kb_dir: Path, llm_server: FakeLLMServer
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEXMATCH_", "OPENAI_"))}
    completed = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--kb",
            str(kb_dir),
            "--model",
            "openai/fake-tool-model",
            "--api-base",
            llm_server.base_url,  # and no key: a local server takes none
            "--verbose",
            QUESTION,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("According to ") and "10,000 blankets" in completed.stdout
    assert f'tool search_knowledge({{"query": "{QUESTION}"}})' in completed.stderr
    first, second = (r.body for r in llm_server.requests_to("/chat/completions"))
    assert first["tools"][0]["function"]["name"] == "search_knowledge"
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    call = assistant["tool_calls"][0]
    tool_message = next(m for m in second["messages"] if m["role"] == "tool")
    assert tool_message["tool_call_id"] == call["id"]
    result = json.loads(tool_message["content"])
    assert result["query"] == QUESTION and "10,000 blankets" in result["results"][0]["content"]
    assert llm_server.requests[0].headers["authorization"] == f"Bearer {NO_KEY}"


def test_run_agent_stops_at_max_steps_and_says_a_refused_key(
    kb: KnowledgeBase, llm_server: FakeLLMServer
) -> None:
    calls: list[str] = []
    stopped = asyncio.run(
        run_agent(
            kb,
            QUESTION,
            model="openai/fake",
            api_base=llm_server.base_url,
            max_steps=1,
            on_tool_call=lambda call: calls.append(call.name),
        )
    )
    assert not stopped.finished and calls == ["search_knowledge"]
    assert "10,000 blankets" in stopped.tool_calls[0].result
    with FakeLLMServer(api_key="right") as guarded, pytest.raises(LLMError) as refused:
        asyncio.run(run_agent(kb, QUESTION, model="openai/fake", api_base=guarded.base_url))
    assert str(refused.value) == (
        "the model 'openai/fake' could not be asked: Incorrect API key provided"
    )


def test_agent_demo_command_runs_offline_against_the_fake_llm_command(kb_dir: Path) -> None:
    """The documented offline flow: the fake LLM server started as a command, then
    ``flexmatch agent-demo`` against it; the answer quotes what the search found."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEXMATCH_", "OPENAI_"))}
    with fake_llm_command() as (_, base_url):
        done = run(
            "agent-demo",
            "--kb",
            str(kb_dir),
            "--model",
            "openai/fake",
            "--api-base",
            base_url,
            QUESTION,
            env=env,
        )
        stats = httpx.get(base_url.removesuffix("/v1") + "/stats").json()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("According to ") and "pdf_fake-memo.pdf: " in done.stdout
    assert "10,000 blankets" in done.stdout
    assert f'tool search_knowledge({{"query": "{QUESTION}"}})' in done.stderr
    assert stats["tool_calls"] == 1 and stats["paths"] == {"/v1/chat/completions": 2}
    missing = run("agent-demo", "--kb", str(kb_dir), QUESTION, env=env)
    assert missing.returncode == 2 and "agent-demo needs a model that calls tools" in missing.stderr
    assert "Traceback" not in missing.stderr


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_loop_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_returns_a_direct_answer_from_the_fake_llm(
    kb: KnowledgeBase, llm_server: FakeLLMServer
) -> None:
    """A model that answers in words at once (a responder overrides the fake server's
    tool calls): the loop ends without searching."""
    llm_server.responder = lambda messages: "I can answer that without searching."
    example = load_example()
    text = asyncio.run(
        example.answer(kb, QUESTION, model="openai/fake", api_base=llm_server.base_url, api_key="x")
    )
    assert text == "I can answer that without searching."
    request = llm_server.requests_to("/chat/completions")[0]
    assert request.body["tools"][0]["function"]["name"] == "search_knowledge"
