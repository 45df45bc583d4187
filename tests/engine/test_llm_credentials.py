"""Credentials at the LLM client, through real litellm against the fake server on loopback:
a local server needs no key, a missing or refused key is reported at once and never
retried, and later calls of that model fail the same way without asking again."""

from __future__ import annotations

import asyncio
import time

import pytest

from flexmatch.engine import llm as llm_module
from flexmatch.engine.llm import LLM, NO_KEY, credential_problem
from flexmatch.errors import LLMError
from flexmatch.testing import FakeLLMServer


@pytest.fixture(autouse=True)
def _no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_a_local_server_without_a_key_is_called(llm_server: FakeLLMServer) -> None:
    llm = LLM("openai/qwen2.5", api_base=llm_server.base_url, max_retries=3)
    assert llm.credential_problem() is None
    assert asyncio.run(llm.complete("hello")) == "OK"
    (request,) = llm_server.requests_to("/chat/completions")
    assert request.headers["authorization"] == f"Bearer {NO_KEY}"


def test_a_provider_without_a_key_fails_at_once(llm_server: FakeLLMServer) -> None:
    problem = credential_problem("openai/gpt-4o-mini", None, None)
    assert problem is not None and "FLEXMATCH_LLM_API_KEY" in problem
    assert "OPENAI_API_KEY" in problem and "FLEXMATCH_LLM_API_BASE" in problem
    assert credential_problem("openai/gpt-4o-mini", None, "sk-x") is None
    assert credential_problem("ollama/llama3", None, None) is None  # a base URL is no key
    llm = LLM("openai/gpt-4o-mini", max_retries=4, retry_base_delay=5)
    assert llm.credential_problem() == problem
    started = time.perf_counter()
    for _ in range(3):
        with pytest.raises(LLMError) as refused:
            asyncio.run(llm.complete("hello"))
        assert str(refused.value) == problem
    assert time.perf_counter() - started < 5  # no backoff: nothing was retried


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_asked_once(llm_server: FakeLLMServer, status: int) -> None:
    llm_server.fail_next = [status] * 10
    llm = LLM("openai/m", api_base=llm_server.base_url, api_key="wrong", max_retries=3)
    with pytest.raises(
        LLMError, match=rf"refused the credentials for 'openai/m' \({status}: Injected fake error"
    ):
        asyncio.run(llm.complete("hello"))
    with pytest.raises(LLMError, match="FLEXMATCH_LLM_API_KEY"):
        asyncio.run(llm.complete("another prompt"))
    assert llm_server.calls() == 1


def test_a_refused_key_is_asked_again_later(
    llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived server recovers once the provider takes the key again."""
    llm_server.fail_next = [401]
    llm = LLM("openai/m", api_base=llm_server.base_url, api_key="k", max_retries=3)
    with pytest.raises(LLMError, match=r"\(401: "):
        asyncio.run(llm.complete("hello"))
    monkeypatch.setattr(llm_module, "REFUSAL_MEMORY", 0.0)
    assert asyncio.run(llm.complete("hello")) == "OK"
    assert llm_server.calls() == 2


def test_the_server_checks_the_key_it_was_given() -> None:
    with FakeLLMServer(api_key="right") as server:
        good = LLM("openai/m", api_base=server.base_url, api_key="right")
        assert asyncio.run(good.complete("hello")) == "OK"
        keyless = LLM("openai/m", api_base=server.base_url)
        with pytest.raises(LLMError, match=r"\(401: Incorrect API key provided\)"):
            asyncio.run(keyless.complete("hello"))
        assert server.stats()["statuses"] == {"200": 1, "401": 1}
