"""Limits on a server started with tiny ones: rate per key, body size, query length."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flexmatch.adapters.http import Limits
from flexmatch.adapters.http.cache import SearchCache
from flexmatch.adapters.http.limits import RateLimiter
from flexmatch.engine.embedders import OnnxEmbedder
from tests.adapters.http.harness import Api, running_api
from tests.adapters.http.servers import assert_error, auth

LIMITS = Limits(max_body_bytes=50_000, max_query_chars=40, rate_per_second=0.2, burst=3)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Api]:
    with running_api(tmp_path_factory.mktemp("limits") / "kb", embedder, LIMITS) as running:
        yield running


def test_rate_limit_per_key_with_retry_after(api: Api) -> None:
    first, second = api.key("r1", "t", "read"), api.key("r2", "t", "read")
    for _ in range(LIMITS.burst):
        assert api.client.get("/v1/stats", headers=auth(first)).status_code == 200
    limited = api.client.get("/v1/stats", headers=auth(first))
    assert_error(limited, 429, "rate_limited")
    assert 1 <= int(limited.headers["retry-after"]) <= 5
    assert api.client.get("/v1/stats", headers=auth(second)).status_code == 200  # per key
    assert api.client.get("/health").status_code == 200  # probes are not limited


def test_body_size_cap(api: Api) -> None:
    token = api.key("body", "t", "read,write")
    big = b"x" * (LIMITS.max_body_bytes + 1)
    declared = api.client.post(
        "/v1/documents", files={"files": ("big.txt", big)}, headers=auth(token)
    )
    assert_error(declared, 413, "body_too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
        for _ in range(10):
            yield b'{"query": "' + b"y" * 10_000

    streamed = api.client.post(
        "/v1/search",
        content=chunks(),
        headers={**auth(token), "Content-Type": "application/json"},
    )
    assert_error(streamed, 413, "body_too_large")
    assert "content-length" not in streamed.request.headers  # it really was streamed


def test_query_length_cap(api: Api) -> None:
    token = api.key("query", "t", "read")
    ok = api.client.post("/v1/search", json={"query": "x" * 40}, headers=auth(token))
    assert ok.status_code == 200 and ok.json()["results"] == []
    too_long = api.client.get("/v1/search", params={"query": "x" * 41}, headers=auth(token))
    body = assert_error(too_long, 422, "query_too_long")
    assert "40-character limit" in body["error"]["message"]


def test_token_bucket_refills() -> None:
    now = [0.0]
    bucket = RateLimiter(rate=2.0, burst=2, clock=lambda: now[0])
    assert bucket.acquire("k") == 0 and bucket.acquire("k") == 0
    assert bucket.acquire("k") == pytest.approx(0.5)
    now[0] += 0.5
    assert bucket.acquire("k") == 0
    assert RateLimiter(rate=0, burst=1).acquire("k") == 0  # 0 turns the limit off


def test_cache_lru_ttl_and_generations() -> None:
    now = [0.0]
    cache = SearchCache(max_entries=2, ttl_seconds=10, clock=lambda: now[0])
    a1, a2, b1 = cache.key("a", "q1"), cache.key("a", "q2"), cache.key("b", "q1")
    cache.put(a1, 1)
    cache.put(a2, 2)
    assert cache.get(a1) == 1
    cache.put(b1, 3)  # evicts a2, the least recently used
    assert cache.get(a2) is None and cache.get(b1) == 3
    stale = cache.key("a", "q3")  # taken before a write to tenant a
    cache.invalidate("a")
    assert cache.get(a1) is None and cache.get(b1) == 3
    cache.put(stale, 4)  # computed before the write: never stored
    assert cache.get(cache.key("a", "q3")) is None
    now[0] += 11
    assert cache.get(b1) is None  # expired
