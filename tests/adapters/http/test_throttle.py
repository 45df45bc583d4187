"""Failed API key checks are throttled per client address and per key id, with
``Retry-After``, and valid keys are not: the rules on their own (with a clock the test
moves) and on a real server, where other loopback addresses (127.0.0.x) play attackers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from flexmatch import KeyStore, KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.adapters.http.limits import RateLimiter
from flexmatch.adapters.http.throttle import Throttle, client_address, key_id_of
from flexmatch.config import KBConfig, ThrottleConfig
from flexmatch.engine.embeddings import OnnxEmbedder
from flexmatch.errors import ConfigError
from flexmatch.yamlio import validate
from tests.adapters.http.servers import UvicornThread, assert_error, auth
from tests.conftest import write_config

BUDGET = 5
WINDOW = 50.0  # one failure regained every 10 s
SETTINGS = ThrottleConfig(
    failures_per_address=BUDGET, failures_per_key=BUDGET, window_seconds=WINDOW
)
UNKNOWN = "fm_000000000000_not-the-secret"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


# -- the rules -----------------------------------------------------------------------------
def test_an_address_gets_its_budget_then_waits_for_it_to_refill() -> None:
    clock = Clock()
    throttle = Throttle(SETTINGS, clock=clock)
    for n in range(BUDGET):
        assert throttle.admit("10.0.0.1", f"fm_{n:012x}_x") == (0.0, "")
        assert throttle.failed("10.0.0.1", f"fm_{n:012x}_x") == 0.0
    wait, reason = throttle.admit("10.0.0.1", "fm_aaaaaaaaaaaa_x")
    assert wait == pytest.approx(WINDOW / BUDGET) and "this address" in reason
    assert throttle.admit("10.0.0.2", "fm_aaaaaaaaaaaa_x") == (0.0, "")  # per address
    clock.now += WINDOW / BUDGET / 2
    assert throttle.admit("10.0.0.1", "x")[0] == pytest.approx(WINDOW / BUDGET / 2)
    clock.now += WINDOW / BUDGET / 2
    assert throttle.admit("10.0.0.1", "x")[0] == 0.0  # one failure regained
    throttle.failed("10.0.0.1", "x")
    assert throttle.admit("10.0.0.1", "x")[0] > 0  # ... and only one


def test_a_success_does_not_refill_the_budget_but_its_token_is_never_throttled() -> None:
    clock = Clock()
    throttle = Throttle(SETTINGS, clock=clock)
    good = "fm_0123456789ab_the-real-secret"
    throttle.succeeded(good)
    for _ in range(BUDGET):
        throttle.failed("10.0.0.1", "junk")
    throttle.succeeded(good)  # an attacker's own valid key does not buy more guesses
    assert throttle.admit("10.0.0.1", "junk")[0] > 0
    assert throttle.admit("10.0.0.1", "fm_fedcba987654_other")[0] > 0
    assert throttle.admit("10.0.0.1", good) == (0.0, "")  # a valid client behind the NAT
    throttle.failed("10.0.0.1", good)  # revoked since: trusted no more
    assert throttle.admit("10.0.0.1", good)[0] > 0
    throttle.succeeded("fm_111111111111_s")
    clock.now += SETTINGS.trusted_seconds + 1
    for _ in range(BUDGET):
        throttle.failed("10.0.0.2", "junk")
    assert throttle.admit("10.0.0.2", "fm_111111111111_s")[0] > 0  # trust expires


def test_a_key_id_under_attack_refuses_its_attackers_but_not_its_owner() -> None:
    throttle = Throttle(SETTINGS, clock=Clock())
    target = "fm_0123456789ab_"
    for n in range(BUDGET):  # a guess each from many addresses
        assert throttle.admit(f"10.0.1.{n}", target + f"guess{n}") == (0.0, "")
        assert throttle.failed(f"10.0.1.{n}", target + f"guess{n}") == 0.0
    wait, reason = throttle.admit("10.0.1.0", target + "again")
    assert wait > 0 and "key id" in reason  # an address that failed before
    assert throttle.admit("10.0.1.0", "fm_fedcba987654_x") == (0.0, "")  # only that id
    # an address with a clean record is still checked: the owner's right secret passes...
    assert throttle.admit("192.168.7.7", target + "the-real-secret") == (0.0, "")
    # ...while a wrong one from there is answered 429, and the next is refused unchecked
    assert throttle.failed("192.168.7.8", target + "wrong") > 0
    assert throttle.admit("192.168.7.8", target + "wrong-again")[0] > 0


def test_tables_are_bounded_and_a_zero_budget_turns_throttling_off() -> None:
    throttle = Throttle(
        ThrottleConfig(failures_per_address=1, failures_per_key=1, max_entries=10), clock=Clock()
    )
    for n in range(1_000):
        throttle.failed(f"10.1.{n // 250}.{n % 250}", f"fm_{n:012x}_x")
        throttle.succeeded(f"fm_{n:012x}_good")
    assert len(throttle.addresses) == 10 and len(throttle.key_ids) == 10
    assert len(throttle._trusted) == 10
    off = Throttle(ThrottleConfig(failures_per_address=0, failures_per_key=0), clock=Clock())
    for _ in range(100):
        off.failed("10.0.0.1", UNKNOWN)
    assert off.admit("10.0.0.1", UNKNOWN) == (0.0, "") and len(off.addresses) == 0


def test_the_per_key_rate_limiter_is_bounded_too() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=1.0, burst=2, clock=clock, max_entries=10)
    for n in range(1_000):
        assert limiter.acquire(f"key{n}") == 0.0
    assert len(limiter) == 10
    assert limiter.acquire("key999") == 0.0 and limiter.acquire("key999") == 1.0


def test_addresses_and_key_ids_are_named_as_throttled() -> None:
    one = client_address("2001:db8:1:2:aaaa::1")
    assert one == client_address("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_address("::ffff:10.0.0.1") == "10.0.0.1"
    assert client_address("10.0.0.1") == "10.0.0.1"
    assert client_address(None) == client_address("") == "unknown"
    assert client_address("testclient") == "testclient"
    assert key_id_of("fm_0123456789ab_secret") == "0123456789ab"
    assert key_id_of("fm_0123456789AB_secret") is None and key_id_of("nonsense") is None


def test_throttle_settings_are_read_from_the_service_config() -> None:
    config = validate(
        KBConfig,
        {"service": {"throttle": {"failures_per_address": 3, "window_seconds": 9}}},
        "flexmatch.yaml",
    )
    assert config.service.throttle.failures_per_address == 3
    assert config.service.throttle.failures_per_key == 20
    with pytest.raises(ConfigError, match="failures_per_address"):
        validate(KBConfig, {"service": {"throttle": {"failures_per_address": -1}}}, "f.yaml")


# -- on a real server ----------------------------------------------------------------------
@dataclass
class Served:
    server: UvicornThread
    clock: Clock
    keys: KeyStore

    def client(self, address: str = "127.0.0.1") -> httpx.Client:
        """A client whose requests come from ``address`` (any 127.0.0.x is loopback)."""
        transport = httpx.HTTPTransport(local_address=address)
        return httpx.Client(base_url=self.server.url, transport=transport, timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Served]:
    kb_dir = tmp_path_factory.mktemp("throttle") / "kb"
    write_config(
        kb_dir,
        "service:\n  throttle:\n"
        f"    failures_per_address: {BUDGET}\n    failures_per_key: {BUDGET}\n"
        f"    window_seconds: {WINDOW}\n",
    )
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    app = create_app(kb, limits=Limits(rate_per_second=1_000, burst=1_000))
    state = app.state.service
    assert state.throttle.settings == SETTINGS  # what flexmatch.yaml said
    clock = Clock()
    state.throttle = Throttle(SETTINGS, clock=clock)  # the same rules, on a clock we move
    try:
        with UvicornThread(app) as server:
            yield Served(server, clock, KeyStore.for_kb(kb_dir))
    finally:
        kb.close()


@pytest.fixture
def fresh(served: Served) -> Served:
    served.server.app.state.service.throttle = Throttle(SETTINGS, clock=served.clock)
    return served


def test_bad_keys_get_429_with_retry_after_and_valid_keys_are_not_slowed(fresh: Served) -> None:
    _, good = fresh.keys.create("t", "read")
    _, unused = fresh.keys.create("t", "read")
    with fresh.client() as client:
        assert client.get("/v1/stats", headers=auth(good)).status_code == 200
        for _ in range(BUDGET):
            assert_error(client.get("/v1/stats", headers=auth(UNKNOWN)), 401, "unauthorized")
        throttled = client.get("/v1/stats", headers={"X-API-Key": "fm_aaaaaaaaaaaa_guess"})
        body = assert_error(throttled, 429, "rate_limited")
        assert throttled.headers["retry-after"] == str(int(WINDOW / BUDGET))
        assert "address" in body["error"]["message"]
        assert_error(client.get("/v1/stats", headers=auth("not-a-key")), 429, "rate_limited")
        # the flood goes on; the key this client already used is answered as ever
        started = time.perf_counter()
        for _ in range(200):
            assert client.get("/v1/stats", headers=auth(UNKNOWN)).status_code == 429
        flood = time.perf_counter() - started
        valid = [client.get("/v1/stats", headers=auth(good)) for _ in range(20)]
        assert all(r.status_code == 200 for r in valid)
        # a key never used from here waits like any other unknown token (documented)
        assert client.get("/v1/stats", headers=auth(unused)).status_code == 429
        assert client.get("/health").status_code == 200  # probes carry no key
        fresh.clock.now += WINDOW / BUDGET  # time moves on: one more check
        assert client.get("/v1/stats", headers=auth(unused)).status_code == 200
    with fresh.client("127.0.0.2") as elsewhere:  # another address has its own budget
        assert_error(elsewhere.get("/v1/stats", headers=auth(UNKNOWN)), 401, "unauthorized")
    assert flood < 20  # refused before any key lookup: 200 in well under 20 s


def test_a_key_id_guessed_from_many_addresses_still_lets_its_owner_in(fresh: Served) -> None:
    key, secret_token = fresh.keys.create("t", "read")
    wrong = f"fm_{key.id}_wrong-secret"
    for n in range(BUDGET):  # one guess from each of five addresses
        with fresh.client(f"127.0.0.{10 + n}") as attacker:
            assert attacker.get("/v1/stats", headers=auth(wrong)).status_code == 401
    with fresh.client("127.0.0.10") as attacker:
        refused = attacker.get("/v1/stats", headers=auth(wrong + "2"))
        assert_error(refused, 429, "rate_limited")
        assert "key id" in refused.json()["error"]["message"]
        assert refused.headers["retry-after"]
        other = attacker.get("/v1/stats", headers=auth(UNKNOWN))  # other ids are not affected
        assert other.status_code == 401
    with fresh.client("127.0.0.30") as newcomer:  # a clean address: checked, failure is 429
        assert_error(newcomer.get("/v1/stats", headers=auth(wrong)), 429, "rate_limited")
    with fresh.client("127.0.0.40") as owner:  # the owner, never seen before, gets in
        assert owner.get("/v1/stats", headers=auth(secret_token)).status_code == 200
