"""Chain warnings: when an LLM query chain's answer cannot be used and a fallback is
taken, the answer says so, in the Python API, in the formatted tool result and on the
CLI, against the fake LLM server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import default_responder
from tests.conftest import llm_config, run, write_config

GUIDE = """# Orchard handbook

The orchard grows apples and pears on the north hill.

## Storage

Fruit is kept in a cold store at two degrees Celsius. The cold store holds forty tonnes.
"""
QUESTION = "cold store temperature"
REWRITE_WARNING = "rewrite: the LLM's rewrite could not be parsed; searched with the query as typed"
RERANK_WARNING = "llm-rerank: the LLM's scores could not be parsed; kept the first-stage order"


def _is_rewrite(messages: list[dict]) -> bool:
    prompt = json.dumps(messages)
    return "<query>" in prompt and "<candidate" not in prompt


def _broken_rewrites(messages: list[dict]) -> str:
    """Unusable output for the query rewrite only (a JSON object cut short); every other
    prompt gets its usual answer."""
    return '{"questions": ["cold' if _is_rewrite(messages) else default_responder(messages)


@pytest.fixture
def guide(tmp_path: Path) -> Path:
    path = tmp_path / "docs" / "orchard.md"
    path.parent.mkdir()
    path.write_text(GUIDE, encoding="utf-8")
    return path


def _kb(
    tmp_path: Path, server: FakeLLMServer, guide: Path, embedder: OnnxEmbedder, extra: str = ""
) -> KnowledgeBase:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(server, extra))
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    assert kb.ingest([guide]).added == 1
    return kb


def test_a_normal_answer_has_no_warnings(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    with _kb(tmp_path, llm_server, guide, embedder, "query:\n  reranker: llm-rerank\n") as kb:
        answer = kb.search(QUESTION)
        output = json.loads(kb.run_sync(kb.aformat_answer(answer, "json")))
    assert answer.warnings == [] and len(answer.variants) == 2
    assert "warnings" not in output


def test_an_unparseable_rewrite_is_a_warning(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    with _kb(tmp_path, llm_server, guide, embedder) as kb:
        llm_server.responder = _broken_rewrites
        answer = kb.search(QUESTION)
        formatted = kb.format(QUESTION, answer.results, "json", warnings=answer.warnings)
        whole = kb.run_sync(kb.aformat_answer(answer, "json"))
    assert answer.warnings == [REWRITE_WARNING]
    assert answer.variants == [QUESTION]  # searched as typed
    assert answer.results and "cold store" in answer.results[0].content
    assert json.loads(formatted)["warnings"] == [REWRITE_WARNING]
    assert json.loads(whole)["warnings"] == [REWRITE_WARNING]
    assert json.loads(whole)["results"] == json.loads(formatted)["results"]


def test_a_malformed_rewrite_is_a_warning(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    with _kb(tmp_path, llm_server, guide, embedder) as kb:
        llm_server.malformed = True
        answer = kb.search(QUESTION)
    assert answer.variants == [QUESTION]  # the garbage is not searched
    assert any(w.startswith("rewrite:") and "could not be parsed" in w for w in answer.warnings)


@pytest.mark.parametrize(
    "breaking",
    [
        pytest.param(lambda server: setattr(server, "malformed", True), id="malformed"),
        pytest.param(
            lambda server: setattr(
                server,
                "responder",
                lambda m: "no scores" if "<candidate" in json.dumps(m) else default_responder(m),
            ),
            id="prose",
        ),
    ],
)
def test_unparseable_rerank_scores_are_a_warning(
    tmp_path: Path,
    guide: Path,
    embedder: OnnxEmbedder,
    llm_server: FakeLLMServer,
    breaking: Callable[[FakeLLMServer], None],
) -> None:
    extra = "query:\n  reranker: llm-rerank\n"
    with _kb(tmp_path, llm_server, guide, embedder, extra) as kb:
        breaking(llm_server)
        question = "How cold is the cold store?"  # a new query: nothing cached for it
        answer = kb.search(question)
        whole = json.loads(kb.run_sync(kb.aformat_answer(answer, "json")))
    assert RERANK_WARNING in answer.warnings
    assert all("could not be parsed" in w for w in answer.warnings)
    assert answer.results and whole["warnings"] == answer.warnings
    assert all(r.signals.rerank is None for r in answer.results)  # not rescored
    scores = [r.score for r in answer.results]
    assert scores == sorted(scores, reverse=True)  # the first-stage order, kept


def test_cli_query_shows_warnings(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    env = {
        "FLEXMATCH_LLM": "openai/fake-model",
        "FLEXMATCH_LLM_API_BASE": llm_server.base_url,
        "FLEXMATCH_LLM_API_KEY": "test-key",
    }
    assert run("init", str(kb_dir)).returncode == 0
    with KnowledgeBase.open(kb_dir, embedder=embedder, env=env) as kb:  # the same config
        assert kb.llm is not None and kb.llm.api_base == llm_server.base_url
        assert kb.ingest([guide]).added == 1
    llm_server.responder = _broken_rewrites

    shown = run("query", "--kb", str(kb_dir), QUESTION, env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"warning: {REWRITE_WARNING}" in " ".join(shown.stderr.split())
    assert "cold store" in shown.stdout

    as_json = run("query", "--kb", str(kb_dir), "--json", QUESTION, env=env)
    assert as_json.returncode == 0, as_json.stderr
    result = json.loads(as_json.stdout)
    assert result["warnings"] == [REWRITE_WARNING]
    assert result["results"] and "cold store" in result["results"][0]["content"]
    assert "warning:" in as_json.stderr  # stdout stays pure JSON
    rewrites = [r for r in llm_server.requests_to() if _is_rewrite(r.body["messages"])]
    assert len(rewrites) == 1  # the second query's rewrite came from the cache
