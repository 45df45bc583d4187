"""Real round trips through litellm and cohere against the fake LLM server."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import json
import math
import time
import urllib.error
import urllib.request

import cohere
import litellm
import pytest

from flexmatch.testing import FakeLLMServer

# litellm's own pydantic models warn about ReadOnly TypedDict items; not our concern here.
pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")


@pytest.fixture(scope="module")
def _server():
    with FakeLLMServer(embedding_dim=64) as server:
        yield server


@pytest.fixture
def server(_server: FakeLLMServer) -> FakeLLMServer:
    _server.reset()
    yield _server
    _server.reset()


def chat(server: FakeLLMServer, content: str, **kwargs) -> str:
    resp = litellm.completion(
        model="openai/fake",
        api_base=server.base_url,
        api_key="x",
        messages=[{"role": "user", "content": content}],
        **kwargs,
    )
    return resp.choices[0].message.content


def embed(server: FakeLLMServer, texts: list[str]) -> list[list[float]]:
    resp = litellm.embedding(
        model="openai/fake-embed", api_base=server.base_url, api_key="x", input=texts
    )
    return [item["embedding"] for item in resp.data]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# --------------------------------------------------------------------------- chat branches


def test_default_ok_and_response_shape(server: FakeLLMServer) -> None:
    resp = litellm.completion(
        model="openai/fake",
        api_base=server.base_url,
        api_key="x",
        messages=[
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Hello there"},
        ],
    )
    assert resp.choices[0].message.content == "OK"
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage.prompt_tokens == 5
    assert resp.usage.completion_tokens == 1
    assert resp.usage.total_tokens == 6
    assert server.calls() == 1
    assert server.successful_calls() == 1
    req = server.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.body["model"] == "fake"
    assert req.headers["authorization"] == "Bearer x"


def test_llm_rerank_branch(server: FakeLLMServer) -> None:
    prompt = (
        "Score each candidate from 0 to 10.\n"
        "<query>how do I reset my password</query>\n"
        "<candidates>\n"
        "[0] The cafeteria opens at nine.\n"
        "[1] To reset your password open settings and choose reset password.\n"
        "[2] Password rules: twelve characters.\n"
        "</candidates>"
    )
    data = json.loads(chat(server, prompt))
    scores = {item["index"]: item["score"] for item in data["scores"]}
    assert set(scores) == {0, 1, 2}
    assert all(0 <= s <= 10 for s in scores.values())
    assert scores[1] > scores[2] > scores[0] == 0


def test_context_branch(server: FakeLLMServer) -> None:
    prompt = (
        "<document>\n\nEmployee Handbook 2024\nSection 1. Leave.\n</document>\n"
        "Situate this chunk:\n"
        "<chunk>Staff get 25 days of leave. Carry-over is limited.</chunk>"
    )
    assert chat(server, prompt) == (
        'This section of "Employee Handbook 2024" covers: Staff get 25 days of leave.'
    )


def test_context_title_truncated(server: FakeLLMServer) -> None:
    title = "T" * 200
    out = chat(server, f"<document>{title}</document><chunk>One.</chunk>")
    assert out == f'This section of "{"T" * 80}" covers: One.'


def test_questions_branch(server: FakeLLMServer) -> None:
    prompt = (
        "Write 2 questions this chunk answers. Reply as JSON.\n"
        "<chunk>The VPN must be enabled on all laptops, including loaners and spares. "
        "Passwords expire every 90 days! Badges are blue.</chunk>"
    )
    data = json.loads(chat(server, prompt))
    assert data == {
        "questions": [
            "What does the text say about the vpn must be enabled on all laptops?",
            "What does the text say about passwords expire every 90 days?",
        ]
    }


def test_questions_default_count(server: FakeLLMServer) -> None:
    chunk = "One fact. Two fact. Three fact. Four fact."
    data = json.loads(chat(server, f"Ask about this.\n<chunk>{chunk}</chunk>"))
    assert len(data["questions"]) == 3
    many = json.loads(chat(server, f"write up to 10 questions\n<chunk>{chunk}</chunk>"))
    assert len(many["questions"]) == 4


def test_golden_question_branch(server: FakeLLMServer) -> None:
    """``flexmatch eval --generate``'s prompt: one question about the passage."""
    prompt = (
        "Write the one question a user would ask.\n<title>Fees</title>\n"
        "<passage>\nMooring costs twelve euros per night. The office opens at six.\n</passage>"
    )
    data = json.loads(chat(server, prompt))
    assert data == {"question": "What is said about mooring costs twelve euros per night?"}


def test_query_rewrite_branch(server: FakeLLMServer) -> None:
    data = json.loads(chat(server, "Rewrite the query.\n<query>vacation policy...</query>"))
    assert data == {"questions": ["Vacation policy?"]}


def test_responder_override_and_multipart_content(server: FakeLLMServer) -> None:
    server.responder = lambda messages: f"{len(messages)} messages"
    assert chat(server, "<query>ignored</query>") == "1 messages"


# --------------------------------------------------------------------------- embeddings


def test_embeddings_dim_norm_and_similarity(server: FakeLLMServer) -> None:
    vecs = embed(
        server,
        [
            "annual leave policy for employees",
            "employees annual leave days policy",
            "quarterly revenue forecast spreadsheet",
        ],
    )
    assert len(vecs) == 3
    assert all(len(v) == 64 for v in vecs)
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-5) for v in vecs)
    assert cosine(vecs[0], vecs[1]) > cosine(vecs[0], vecs[2])
    assert cosine(vecs[0], vecs[1]) > 0.7
    # deterministic
    assert embed(server, ["annual leave policy for employees"])[0] == pytest.approx(vecs[0])
    assert server.calls("/embeddings") == 2


def test_embeddings_single_string(server: FakeLLMServer) -> None:
    resp = litellm.embedding(
        model="openai/fake-embed", api_base=server.base_url, api_key="x", input="just one"
    )
    assert len(resp.data) == 1
    assert len(resp.data[0]["embedding"]) == 64


# --------------------------------------------------------------------------- cohere rerank


def test_cohere_rerank(server: FakeLLMServer) -> None:
    co = cohere.ClientV2(api_key="x", base_url=server.root_url)
    resp = co.rerank(
        model="rerank-v3.5",
        query="password reset steps",
        documents=[
            "Lunch menu for Friday.",
            "Steps to reset a forgotten password.",
            "Password length rules.",
        ],
        top_n=2,
    )
    assert [r.index for r in resp.results] == [1, 2]
    assert 0 <= resp.results[1].relevance_score <= resp.results[0].relevance_score <= 1
    assert resp.meta.api_version.version == "2"
    assert resp.meta.billed_units.search_units == 1
    assert server.calls("/v2/rerank") == 1


# --------------------------------------------------------------------------- failure modes


def test_rate_limit_then_success(server: FakeLLMServer) -> None:
    server.fail_next = [429]
    with pytest.raises(litellm.RateLimitError):
        chat(server, "hi", num_retries=0)
    assert chat(server, "hi", num_retries=0) == "OK"
    assert server.calls() == 2
    assert server.successful_calls() == 1
    assert server.requests[0].status == 429


def test_fail_next_raw_http(server: FakeLLMServer) -> None:
    server.fail_next = [429, 500]
    for expected in (429, 500):
        req = urllib.request.Request(
            f"{server.base_url}/chat/completions",
            data=b'{"messages": []}',
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=5)
        assert info.value.code == expected
        body = json.loads(info.value.read())
        assert body["error"]["type"] in ("rate_limit_error", "server_error")
        if expected == 429:
            assert info.value.headers["Retry-After"] == "0"
    assert server.fail_next == []


def test_malformed_mode(server: FakeLLMServer) -> None:
    server.malformed = True
    out = chat(server, "Write 3 questions\n<chunk>Some text.</chunk>")
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


def test_unknown_path_and_models(server: FakeLLMServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{server.root_url}/nope", timeout=5)
    assert info.value.code == 404
    assert "error" in json.loads(info.value.read())
    with urllib.request.urlopen(f"{server.base_url}/models", timeout=5) as resp:
        models = json.loads(resp.read())
    assert {m["id"] for m in models["data"]} >= {"fake", "fake-embed"}


def test_latency_honoured(server: FakeLLMServer) -> None:
    server.latency = 0.2
    start = time.perf_counter()
    chat(server, "slow")
    assert time.perf_counter() - start >= 0.2


# --------------------------------------------------------------------------- streaming, speed


def test_streaming(server: FakeLLMServer) -> None:
    stream = litellm.completion(
        model="openai/fake",
        api_base=server.base_url,
        api_key="x",
        messages=[{"role": "user", "content": "Rewrite.\n<query>where is the office</query>"}],
        stream=True,
    )
    parts = [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
    assert len(parts) > 1
    assert json.loads("".join(parts)) == {"questions": ["Where is the office?"]}
    assert server.requests[0].body["stream"] is True


def test_ten_calls_are_fast(server: FakeLLMServer) -> None:
    """No delay of the fake's own (~10 ms a call through litellm): a delay every call has
    shows in the fastest of ten, which a loaded machine's pauses in some calls do not move."""
    chat(server, "warm up")
    took = []
    for _ in range(10):
        start = time.perf_counter()
        chat(server, "ping")
        took.append(time.perf_counter() - start)
    took.sort()
    assert took[0] < 0.1 and took[5] < 0.5, took


def test_stop_releases_port() -> None:
    server = FakeLLMServer().start()
    url = server.base_url
    assert chat(server, "hi") == "OK"
    server.stop()
    assert not server.running
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/models", timeout=2)
