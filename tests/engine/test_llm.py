"""The LLM client through real litellm against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from flexmatch.engine.llm import LLM
from flexmatch.engine.llm_cache import LLMCache
from flexmatch.errors import LLMError
from flexmatch.testing import FakeLLMServer


def _llm(server: FakeLLMServer, cache: LLMCache | None = None, **kwargs: object) -> LLM:
    options = {"max_retries": 3, "retry_base_delay": 0.01, **kwargs}
    return LLM("openai/fake", api_base=server.base_url, api_key="k", cache=cache, **options)


def test_completion_counts_tokens(llm_server: FakeLLMServer) -> None:
    llm = _llm(llm_server)
    text = asyncio.run(llm.complete("Rewrite <query>\nfood location\n</query>"))
    assert text == '{"questions": ["Food location?"]}'
    assert llm.usage.calls == 1 and llm.usage.prompt_tokens > 0
    assert llm.usage.completion_tokens > 0


def test_rate_limit_then_success_is_retried(llm_server: FakeLLMServer) -> None:
    llm_server.fail_next = [429, 500]
    text = asyncio.run(_llm(llm_server).complete("hello"))
    assert text == "OK"
    assert llm_server.calls() == 3 and llm_server.successful_calls() == 1


def test_persistent_failure_is_a_clear_error(llm_server: FakeLLMServer) -> None:
    llm_server.fail_next = [500] * 5
    with pytest.raises(LLMError, match=r"openai/fake.*failed after retries.*InternalServerError"):
        asyncio.run(_llm(llm_server, max_retries=2).complete("hello"))
    assert llm_server.calls() == 3


def test_cache_survives_a_restart(llm_server: FakeLLMServer, tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    first = _llm(llm_server, LLMCache(path))
    asyncio.run(first.complete("same prompt"))
    second = _llm(llm_server, LLMCache(path))
    assert asyncio.run(second.complete("same prompt")) == "OK"
    assert llm_server.calls() == 1
    assert second.usage.calls == 0 and second.usage.cached_calls == 1
    asyncio.run(second.complete("another prompt"))
    assert llm_server.calls() == 2


class InFlight:
    """A responder that counts the chat calls the server answers at once: each call waits
    (up to 30 s) until ``together`` have been in at once, then stays ``linger`` seconds
    more, time for any call beyond the limit to show. Counted at the server, so a loaded
    machine's slow client changes no count."""

    def __init__(self, together: int, linger: float = 0.0) -> None:
        self.together, self.linger = together, linger
        self.now = self.peak = 0
        self.changed = threading.Condition()

    def __call__(self, messages: list[dict]) -> str:
        with self.changed:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.peak >= self.together, timeout=30)
        time.sleep(self.linger)
        with self.changed:
            self.now -= 1
        return "OK"


def test_concurrency_limit_is_honoured(llm_server: FakeLLMServer) -> None:
    async def run(llm: LLM) -> None:
        await asyncio.gather(*(llm.complete(f"prompt {i}") for i in range(6)))

    llm_server.responder = two = InFlight(together=2, linger=0.2)
    asyncio.run(run(_llm(llm_server, concurrency=2)))
    assert two.peak == 2  # two at once, never a third
    llm_server.responder = six = InFlight(together=6)
    asyncio.run(run(_llm(llm_server, concurrency=6)))
    assert six.peak == 6  # all six at the server at once


def test_cache_keeps_servers_apart(tmp_path: Path) -> None:
    """One cache file, the same model name and prompt on two servers: each answer comes
    from its own server, and a repeat is served from the cache without a call."""
    path = tmp_path / "shared-cache.sqlite"
    with FakeLLMServer() as first, FakeLLMServer() as second:
        first.responder = lambda messages: "answer from the first server"
        second.responder = lambda messages: "answer from the second server"
        cache = LLMCache(path)
        one = LLM("openai/same-model", api_base=first.base_url, api_key="k", cache=cache)
        two = LLM("openai/same-model", api_base=second.base_url, api_key="k", cache=cache)
        assert asyncio.run(one.complete("the same prompt")) == "answer from the first server"
        assert asyncio.run(two.complete("the same prompt")) == "answer from the second server"
        assert (first.calls(), second.calls()) == (1, 1) and len(cache) == 2
        assert one.is_cached("the same prompt") and two.is_cached("the same prompt")

        assert asyncio.run(one.complete("the same prompt")) == "answer from the first server"
        assert asyncio.run(two.complete("the same prompt")) == "answer from the second server"
        assert (first.calls(), second.calls()) == (1, 1)  # both repeats were cache hits
        assert one.usage.calls == 1 and one.usage.cached_calls == 1
        assert two.usage.calls == 1 and two.usage.cached_calls == 1
        cache.close()

        reopened = LLMCache(path)  # the separation survives a restart
        three = LLM("openai/same-model", api_base=second.base_url, api_key="k", cache=reopened)
        assert asyncio.run(three.complete("the same prompt")) == "answer from the second server"
        assert second.calls() == 1 and three.usage.cached_calls == 1
        reopened.close()
