"""Failed API key checks are throttled per client address and per key id, with
``Retry-After``, and valid keys are not: the rules on their own (with a clock the test
moves) and on a real server, where other loopback addresses (127.0.0.x) play attackers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from flexmatch import KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.adapters.http.limits import RateLimiter
from flexmatch.adapters.http.throttle import (
    KNOWN_IDS_SECONDS,
    NETWORK_FACTOR,
    Throttle,
    client_address,
    client_network,
    key_id_of,
)
from flexmatch.config import KBConfig, ThrottleConfig
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.errors import ConfigError
from flexmatch.service import KeyStore
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
TARGET = "0123456789ab"  # a key id that exists


def known(*ids: str) -> Callable[[], list[str]]:
    return lambda: list(ids)


def throttle_on(clock: Clock, settings: ThrottleConfig = SETTINGS, *ids: str) -> Throttle:
    """A throttle on ``clock`` that knows ``ids`` exist (as the key store would say)."""
    throttle = Throttle(settings, clock=clock, known_ids=known(*ids))
    throttle.known.refresh()
    return throttle


def fail(throttle: Throttle, host: str, token: str) -> float:
    """Admit a check and count it failed: what it is answered with (0: 401)."""
    admission = throttle.admit(host, token)
    assert admission.wait == 0, admission
    return throttle.failed(admission)


def succeed(throttle: Throttle, host: str, token: str) -> None:
    admission = throttle.admit(host, token)
    assert admission.wait == 0, admission
    throttle.succeeded(admission)


def test_an_address_gets_its_budget_then_waits_for_it_to_refill() -> None:
    clock = Clock()
    throttle = throttle_on(clock)
    for n in range(BUDGET):
        assert fail(throttle, "10.0.0.1", f"fm_{n:012x}_x") == 0.0
    refused = throttle.admit("10.0.0.1", "fm_aaaaaaaaaaaa_x")
    assert refused.wait == pytest.approx(WINDOW / BUDGET) and "this address" in refused.reason
    assert throttle.admit("10.0.0.2", "fm_aaaaaaaaaaaa_x").wait == 0.0  # per address
    clock.now += WINDOW / BUDGET / 2
    assert throttle.admit("10.0.0.1", "x").wait == pytest.approx(WINDOW / BUDGET / 2)
    clock.now += WINDOW / BUDGET / 2
    fail(throttle, "10.0.0.1", "x")  # one failure regained...
    assert throttle.admit("10.0.0.1", "x").wait > 0  # ... and only one


def test_a_success_gives_back_only_its_own_failure_and_its_token_is_never_throttled() -> None:
    clock = Clock()
    throttle = throttle_on(clock)
    good = "fm_0123456789ab_the-real-secret"
    succeed(throttle, "10.0.0.1", good)
    assert throttle.addresses.tokens("10.0.0.1") == BUDGET  # taken at admit, given back
    for _ in range(BUDGET):
        fail(throttle, "10.0.0.1", "junk")
    succeed(throttle, "10.0.0.1", good)  # an attacker's own valid key buys no more guesses
    assert throttle.admit("10.0.0.1", "junk").wait > 0
    assert throttle.admit("10.0.0.1", "fm_fedcba987654_other").wait > 0
    trusted = throttle.admit("10.0.0.1", good)
    assert trusted.wait == 0.0 and trusted.trusted  # a valid client behind the NAT
    throttle.failed(trusted)  # revoked since: trusted no more
    assert throttle.admit("10.0.0.1", good).wait > 0
    succeed(throttle, "10.0.0.9", "fm_111111111111_s")
    clock.now += SETTINGS.trusted_seconds + 1
    for _ in range(BUDGET):
        fail(throttle, "10.0.0.2", "junk")
    expired = throttle.admit("10.0.0.2", "fm_111111111111_s")  # trust expires: its id
    assert expired.wait == 0 and expired.spent and not expired.trusted  # exists, so checked


def test_a_key_id_under_attack_refuses_its_attackers_but_not_its_owner() -> None:
    throttle = throttle_on(Clock(), SETTINGS, TARGET)
    target = f"fm_{TARGET}_"
    for n in range(BUDGET):  # a guess each from many addresses
        assert fail(throttle, f"10.0.1.{n}", target + f"guess{n}") == 0.0
    refused = throttle.admit("10.0.1.0", target + "again")
    assert refused.wait > 0 and "key id" in refused.reason  # an address that failed before
    assert throttle.admit("10.0.1.0", "fm_fedcba987654_x").wait == 0.0  # only that id
    # an address with a clean record is still checked: the owner's right secret passes...
    succeed(throttle, "192.168.7.7", target + "the-real-secret")
    # ...while a wrong one from there is answered 429, and the next is refused unchecked
    assert fail(throttle, "192.168.7.8", target + "wrong") > 0
    assert throttle.admit("192.168.7.8", target + "wrong-again").wait > 0
    # the bucket goes below zero, but no lower than minus its budget
    for n in range(4 * BUDGET):
        fail(throttle, f"10.0.2.{n}", target + "more")
    assert throttle.key_ids.tokens(TARGET) == -BUDGET
    assert throttle.admit("10.0.1.0", target + "x").wait == pytest.approx(WINDOW + WINDOW / BUDGET)


def test_made_up_key_ids_have_no_bucket_and_cannot_push_out_a_real_one() -> None:
    throttle = throttle_on(Clock(), SETTINGS, TARGET)
    for n in range(BUDGET):
        fail(throttle, f"10.0.1.{n}", f"fm_{TARGET}_guess")
    for n in range(2_000):  # random ids from many addresses
        fail(throttle, f"10.2.{n // 250}.{n % 250}", f"fm_{n:012x}_x")
    assert len(throttle.key_ids) == 1
    assert "key id" in throttle.admit("10.0.1.0", f"fm_{TARGET}_again").reason


def test_a_spent_address_still_checks_keys_that_exist_with_a_clean_record() -> None:
    """Behind a NAT (or ``unknown`` under a unix socket) one client's bad keys must not
    lock out every valid key that this process has not seen yet (after a restart)."""
    clock = Clock()
    throttle = throttle_on(clock, SETTINGS, TARGET, "fedcba987654")
    for _ in range(BUDGET):
        fail(throttle, "unknown", "fm_000000000000_bad")
    assert throttle.admit("unknown", "fm_000000000000_bad").wait > 0  # made up: refused
    assert throttle.admit("unknown", "not-a-key").wait > 0
    admission = throttle.admit("unknown", f"fm_{TARGET}_the-real-secret")
    assert admission.wait == 0 and admission.spent  # a key that exists: checked
    throttle.succeeded(admission)
    # a wrong secret of an existing id from there: checked once, answered 429...
    assert fail(throttle, "unknown", "fm_fedcba987654_guess") == pytest.approx(2 * WINDOW / BUDGET)
    refused = throttle.admit("unknown", "fm_fedcba987654_again")  # ...then refused
    assert refused.wait > 0 and "this address" in refused.reason
    assert throttle.addresses.tokens("unknown") >= -BUDGET


def test_a_shared_address_running_out_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    throttle = throttle_on(Clock())
    with caplog.at_level(logging.WARNING, "flexmatch.adapters.http"):
        for _ in range(BUDGET):
            fail(throttle, "93.184.216.34", "junk")  # a public address: its own business
        assert not caplog.records
        for _ in range(BUDGET):
            fail(throttle, "unknown", "junk")
    assert len(caplog.records) == 1 and "unknown" in caplog.records[0].getMessage()
    assert "FORWARDED_ALLOW_IPS" in caplog.records[0].getMessage()


def test_checks_running_at_once_cannot_overspend_a_budget() -> None:
    throttle = throttle_on(Clock())
    for _ in range(BUDGET - 1):
        fail(throttle, "10.0.0.1", "junk")
    first = throttle.admit("10.0.0.1", "junk-a")  # both checks in flight at once
    second = throttle.admit("10.0.0.1", "junk-b")
    assert first.wait == 0 and second.wait > 0  # the last failure was taken by the first
    throttle.succeeded(first)  # ...and given back when it passed
    assert throttle.admit("10.0.0.1", "junk-c").wait == 0


def test_a_zero_address_budget_leaves_the_key_id_rule_on() -> None:
    settings = ThrottleConfig(failures_per_address=0, failures_per_key=BUDGET)
    throttle = throttle_on(Clock(), settings, TARGET)
    for n in range(BUDGET):
        fail(throttle, f"10.0.1.{n}", f"fm_{TARGET}_guess")
    assert "key id" in throttle.admit("10.0.1.0", f"fm_{TARGET}_again").reason
    assert throttle.admit("10.0.9.9", f"fm_{TARGET}_owner").wait == 0  # a clean address


def test_an_ipv6_site_shares_a_larger_budget_over_its_64s() -> None:
    throttle = throttle_on(Clock())
    per_site = BUDGET * NETWORK_FACTOR
    for n in range(per_site):  # one failure from each of many /64s of one /48
        fail(throttle, f"2001:db8:1:{n:x}::1", "junk")
    refused = throttle.admit("2001:db8:1:ffff::1", "junk")  # a /64 never seen before
    assert refused.wait > 0 and "this address" in refused.reason
    assert throttle.admit("2001:db8:2::1", "junk").wait == 0  # another /48


def test_a_full_table_drops_refilled_entries_first_never_a_spent_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    settings = ThrottleConfig(
        failures_per_address=BUDGET, failures_per_key=BUDGET, window_seconds=WINDOW, max_entries=10
    )
    throttle = throttle_on(clock, settings)
    for _ in range(BUDGET):
        fail(throttle, "10.0.0.1", "junk")  # the address under watch: spent
    with caplog.at_level(logging.WARNING, "flexmatch.adapters.http"):
        for n in range(1_000):  # one failure each from a thousand other addresses
            fail(throttle, f"10.3.{n // 250}.{n % 250}", "junk")
    assert len(throttle.addresses) <= 10
    assert throttle.admit("10.0.0.1", "junk").wait > 0  # not handed back a full budget
    full = [r for r in caplog.records if "dropped the" in r.getMessage()]
    assert len(full) == 1  # once a minute at most, however often it happens
    clock.now += 2 * WINDOW  # everyone refilled: they go first, without a warning
    caplog.clear()
    fail(throttle, "10.0.0.1", "junk")
    for _ in range(BUDGET - 1):
        fail(throttle, "10.0.0.1", "junk")
    with caplog.at_level(logging.WARNING, "flexmatch.adapters.http"):
        for n in range(5):
            fail(throttle, f"10.4.0.{n}", "junk")
    assert throttle.admit("10.0.0.1", "junk").wait > 0
    assert len(throttle.addresses) == 6  # all the refilled ones went, no live one
    assert not [r for r in caplog.records if "dropped the" in r.getMessage()]


def test_the_known_key_ids_are_read_again_when_stale() -> None:
    clock, ids = Clock(), ["0123456789ab"]
    throttle = Throttle(SETTINGS, clock=clock, known_ids=lambda: list(ids))
    token = "fm_fedcba987654_secret"
    assert throttle.needs_known_ids(token) and not throttle.needs_known_ids("junk")
    throttle.known.refresh()
    assert not throttle.needs_known_ids(token) and "0123456789ab" in throttle.known
    ids.append("fedcba987654")  # a key made since (on another replica)
    assert "fedcba987654" not in throttle.known
    clock.now += KNOWN_IDS_SECONDS
    assert throttle.needs_known_ids(token)
    throttle.known.refresh()
    assert "fedcba987654" in throttle.known


def test_tables_are_bounded_and_a_zero_budget_turns_throttling_off() -> None:
    settings = ThrottleConfig(failures_per_address=1, failures_per_key=1, max_entries=10)
    ids = [f"{n:012x}" for n in range(1_000)]
    throttle = throttle_on(Clock(), settings, *ids)
    for n in range(1_000):
        throttle.failed(throttle.admit(f"10.1.{n // 250}.{n % 250}", f"fm_{n:012x}_x"))
        throttle.succeeded(throttle.admit(f"10.2.{n // 250}.{n % 250}", f"fm_{n:012x}_good"))
        throttle.failed(throttle.admit(f"2001:db8:{n:x}::1", "junk"))
    assert len(throttle.addresses) <= 10 and len(throttle.key_ids) <= 10
    assert len(throttle.networks) <= 10 and len(throttle.recent) <= 10
    assert len(throttle._trusted) == 10
    off = Throttle(ThrottleConfig(failures_per_address=0, failures_per_key=0), clock=Clock())
    for _ in range(100):
        fail(off, "10.0.0.1", UNKNOWN)
    assert off.admit("10.0.0.1", UNKNOWN).wait == 0.0 and len(off.addresses) == 0


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
    assert client_network("2001:db8:1:2::1") == "2001:db8:1::/48"
    assert client_network("10.0.0.1") is None and client_network("::ffff:10.0.0.1") is None
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
    verified: list[str]  # every token the key store was asked about

    def client(self, address: str = "127.0.0.1") -> httpx.Client:
        """A client whose requests come from ``address`` (any 127.0.0.x is loopback)."""
        transport = httpx.HTTPTransport(local_address=address)
        return httpx.Client(base_url=self.server.url, transport=transport, timeout=30)

    def throttle(self) -> Throttle:
        return self.server.app.state.service.throttle


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
    assert state.throttle.known.load is not None  # it reads which key ids exist
    keys, verified, lock = state.keys, [], threading.Lock()
    verify = keys.verify

    def counted(token: str) -> object:
        # off the event loop, on the key checks' own threads
        assert threading.current_thread().name.startswith("flexmatch-keys")
        with lock:
            verified.append(token)
        return verify(token)

    keys.verify = counted  # type: ignore[method-assign]
    try:
        with UvicornThread(app) as server:
            yield Served(server, Clock(), KeyStore.for_kb(kb_dir), verified)
    finally:
        kb.close()


@pytest.fixture
def fresh(served: Served) -> Served:
    """Budgets all full again, the same rules on a clock the test moves."""
    keys = served.keys
    served.server.app.state.service.throttle = Throttle(
        SETTINGS, clock=served.clock, known_ids=lambda: [k.id for k in keys.list()]
    )
    served.verified.clear()
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
        # the flood goes on, and not one of it reaches the key store
        checked = len(fresh.verified)
        for _ in range(200):
            assert client.get("/v1/stats", headers=auth(UNKNOWN)).status_code == 429
        assert len(fresh.verified) == checked
        # the key this client already used is answered as ever...
        valid = [client.get("/v1/stats", headers=auth(good)) for _ in range(20)]
        assert all(r.status_code == 200 for r in valid)
        # ...and so is a key never used from here: its id exists and has no failures
        assert client.get("/v1/stats", headers=auth(unused)).status_code == 200
        assert fresh.verified[-1] == unused
        assert client.get("/health").status_code == 200  # probes carry no key
    with fresh.client("127.0.0.2") as elsewhere:  # another address has its own budget
        assert_error(elsewhere.get("/v1/stats", headers=auth(UNKNOWN)), 401, "unauthorized")


def test_a_key_id_guessed_from_many_addresses_still_lets_its_owner_in(fresh: Served) -> None:
    key, secret_token = fresh.keys.create("t", "read")
    wrong = f"fm_{key.id}_wrong-secret"
    for n in range(BUDGET):  # one guess from each of five addresses
        with fresh.client(f"127.0.0.{10 + n}") as attacker:
            assert attacker.get("/v1/stats", headers=auth(wrong)).status_code == 401
    with fresh.client("127.0.0.10") as attacker:
        checked = len(fresh.verified)
        refused = attacker.get("/v1/stats", headers=auth(wrong + "2"))
        assert_error(refused, 429, "rate_limited")
        assert "key id" in refused.json()["error"]["message"]
        assert refused.headers["retry-after"]
        assert len(fresh.verified) == checked  # refused before the check
        other = attacker.get("/v1/stats", headers=auth(UNKNOWN))  # other ids are not affected
        assert other.status_code == 401
    with fresh.client("127.0.0.30") as newcomer:  # a clean address: checked, failure is 429
        assert_error(newcomer.get("/v1/stats", headers=auth(wrong)), 429, "rate_limited")
    with fresh.client("127.0.0.40") as owner:  # the owner, never seen before, gets in
        assert owner.get("/v1/stats", headers=auth(secret_token)).status_code == 200


def test_x_forwarded_for_counts_only_from_a_trusted_proxy(fresh: Served) -> None:
    """uvicorn reads ``X-Forwarded-For`` only from ``FORWARDED_ALLOW_IPS`` (by default
    127.0.0.1): from anyone else, a client cannot pick a fresh address for each guess."""
    with fresh.client("127.0.0.2") as untrusted:
        for n in range(BUDGET):
            forged = {**auth(UNKNOWN), "X-Forwarded-For": f"198.51.100.{n}"}
            assert untrusted.get("/v1/stats", headers=forged).status_code == 401
        forged = {**auth(UNKNOWN), "X-Forwarded-For": "198.51.100.99"}
        assert_error(untrusted.get("/v1/stats", headers=forged), 429, "rate_limited")
    with fresh.client("127.0.0.1") as proxy:  # the trusted proxy: each client its own budget
        for n in range(2 * BUDGET):
            forwarded = {**auth(UNKNOWN), "X-Forwarded-For": f"198.51.100.{n}"}
            assert proxy.get("/v1/stats", headers=forwarded).status_code == 401
    assert fresh.throttle().addresses.wait("198.51.100.99") == 0
    assert fresh.throttle().addresses.wait("127.0.0.2") > 0
