"""The fake LLM server as a command (``python -m flexmatch.testing.fake_llm``): where it
listens, its latency, its key, ``/stats`` and its tool-call mode, through the real OpenAI
client against a real server process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest

from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import tool_call_message
from tests.conftest import stop

SEARCH = {
    "type": "function",
    "function": {
        "name": "search_knowledge",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}
OTHER = {"type": "function", "function": {"name": "add_record", "parameters": {}}}


@contextmanager
def fake_llm_command(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The command started on a free port; yields it and its base URL (from its first line)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "flexmatch.testing.fake_llm", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("Fake LLM server on http://127.0.0.1:"), line
        yield process, line.split()[4]
    finally:
        stop(process)


def test_the_command_serves_tool_calls_latency_a_key_and_stats() -> None:
    with fake_llm_command("--latency", "0.3", "--api-key", "sekrit") as (process, base_url):
        client = openai.OpenAI(base_url=base_url, api_key="sekrit", max_retries=0)
        question = "How many blankets were delivered?"
        started = time.perf_counter()
        first = client.chat.completions.create(
            model="qwen2.5",
            messages=[{"role": "user", "content": question}],
            tools=[OTHER, SEARCH],  # type: ignore[list-item]
        )
        assert time.perf_counter() - started >= 0.3
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert first.choices[0].finish_reason == "tool_calls"
        assert call.function.name == "search_knowledge"  # type: ignore[union-attr]
        assert json.loads(call.function.arguments) == {"query": question}  # type: ignore[union-attr]

        result = {"results": [{"uri": "memo.pdf", "content": "10,000 blankets arrived."}]}
        second = client.chat.completions.create(
            model="qwen2.5",
            messages=[
                {"role": "user", "content": question},
                first.choices[0].message.model_dump(exclude_none=True),  # type: ignore[list-item]
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)},
            ],
            tools=[SEARCH],  # type: ignore[list-item]
        )
        assert (
            second.choices[0].message.content == "According to memo.pdf: 10,000 blankets arrived."
        )

        wrong = openai.OpenAI(base_url=base_url, api_key="guess", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        client.embeddings.create(model="fake-embed", input=["a b", "c"])

        stats = httpx.get(base_url.removesuffix("/v1") + "/stats").json()
        assert stats["calls"] == 4 and stats["tool_calls"] == 1 and stats["latency"] == 0.3
        assert stats["paths"] == {"/v1/chat/completions": 3, "/v1/embeddings": 1}
        assert stats["statuses"] == {"200": 3, "401": 1}
        tokens = stats["tokens"]
        assert tokens["prompt"] > 0 and tokens["completion"] > 0
        assert tokens["total"] == tokens["prompt"] + tokens["completion"]
        process.terminate()  # SIGTERM: a clean stop
        assert process.wait(timeout=10) == 0


def test_the_command_refuses_a_public_address() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "flexmatch.testing.fake_llm", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "loopback" in done.stderr and "Traceback" not in done.stderr


def test_tool_call_mode_in_process() -> None:
    """A request offering tools gets a call of the search tool; words once the tool's result
    is in; ``tool_calls = False`` (or a responder) answers in words; ``reset`` zeroes stats."""
    user = {"role": "user", "content": "Where is the food?"}
    called = tool_call_message([user], [OTHER, SEARCH], "call_1")
    assert called["tool_calls"][0]["function"]["name"] == "search_knowledge"
    only_other = tool_call_message([user], [OTHER], "call_1")
    assert json.loads(only_other["tool_calls"][0]["function"]["arguments"]) == {}
    empty = {"role": "tool", "tool_call_id": "call_1", "content": '{"results": []}'}
    answer = tool_call_message([user, called, empty], [SEARCH], "call_2")
    assert answer == {"role": "assistant", "content": "The knowledge base has nothing on that."}
    failed = {"role": "tool", "tool_call_id": "call_1", "content": '{"error": "bad query"}'}
    assert "bad query" in tool_call_message([user, called, failed], [SEARCH], "c")["content"]

    with FakeLLMServer() as server:
        body = {"model": "m", "messages": [user], "tools": [SEARCH]}
        url = f"{server.base_url}/chat/completions"
        reply = httpx.post(url, json=body).json()["choices"][0]
        assert reply["finish_reason"] == "tool_calls"
        streamed = httpx.post(url, json={**body, "stream": True}).text
        assert (
            '"tool_calls": [{"index": 0' in streamed and '"finish_reason": "tool_calls"' in streamed
        )
        server.tool_calls = False
        reply = httpx.post(url, json=body).json()["choices"][0]
        assert reply["finish_reason"] == "stop" and reply["message"]["content"] == "OK"
        assert server.stats()["calls"] == 3 and server.stats()["tool_calls"] == 2
        server.reset()
        assert server.stats()["calls"] == 0 and server.tool_calls is True
