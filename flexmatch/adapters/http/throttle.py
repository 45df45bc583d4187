"""Throttling of failed API key checks and console sign-ins, per client address and key id.

Keys are 256-bit random secrets, so guessing one is hopeless anyway: this is the defence
in depth a shared service is expected to have, and it stops a flood of bad keys from
costing a database read each. The rules, for a request that carries a key:

1. A token that passed a check on this process within ``trusted_seconds`` is checked as
   always (revocation stays immediate) and never throttled. So a valid client keeps
   working from an address an attacker shares (a NAT, an office proxy), and an owner is
   not locked out of a key id that someone else is guessing at.
2. Each client address (IPv6 by its /64, which one host usually holds whole) may fail
   ``failures_per_address`` times; the budget comes back over ``window_seconds`` (a
   token bucket). Once it is spent, other tokens from that address are refused with
   429 and ``Retry-After`` before they are checked: one address's guess rate is bounded.
3. Each key id may fail ``failures_per_key`` times, from all addresses together. Once
   that is spent the id is under attack: an address that has failed recently is refused
   before its check, while an address with a clean record is still checked (its owner
   can sign in) and a failure there is answered 429 too. This is what an attack spread
   over many addresses meets; throttling the id for everyone would let anyone lock its
   owner out (the lockout denial of service OWASP and django-axes warn about).

A success never refills a budget (else an attacker would interleave a key of their own).
The address is the one the server sees: behind a reverse proxy, uvicorn takes it from
``X-Forwarded-For`` only when the proxy is in ``FORWARDED_ALLOW_IPS`` (else every client
shares the proxy's budget).

Everything is in this process's memory: with several replicas (or workers) each keeps
its own budgets, so the figures are per replica. Each table holds at most
``max_entries`` entries, the least recently used dropped first.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from flexmatch import KBConfig

log = logging.getLogger("flexmatch.adapters.http")
_KEY_ID = re.compile(r"^fm_([0-9a-f]{12})_")


class ThrottleSettings(Protocol):
    """What ``service.throttle`` of ``flexmatch.yaml`` says (read-only here)."""

    @property
    def failures_per_address(self) -> int: ...
    @property
    def failures_per_key(self) -> int: ...
    @property
    def window_seconds(self) -> float: ...
    @property
    def trusted_seconds(self) -> float: ...
    @property
    def max_entries(self) -> int: ...


class FailureBuckets:
    """A token bucket of failures per name, ``budget`` deep, refilled over ``window``."""

    def __init__(
        self, budget: int, window: float, max_entries: int, clock: Callable[[], float]
    ) -> None:
        self.budget = budget
        self.rate = budget / window if budget else 0.0  # failures regained per second
        self.max_entries = max_entries
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, when

    def _tokens(self, name: str, now: float) -> float:
        tokens, last = self._buckets.get(name, (float(self.budget), now))
        return min(float(self.budget), tokens + (now - last) * self.rate)

    def wait(self, name: str) -> float:
        """Seconds until ``name`` may fail again (0: it may now)."""
        if not self.budget:
            return 0.0
        tokens = self._tokens(name, self.clock())
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def clean(self, name: str) -> bool:
        """Whether ``name`` has its whole budget (no failure it has not lived down)."""
        return not self.budget or self._tokens(name, self.clock()) >= self.budget

    def take(self, name: str) -> None:
        """Count one failure of ``name``."""
        if not self.budget:
            return
        now = self.clock()
        self._buckets[name] = (max(0.0, self._tokens(name, now) - 1.0), now)
        self._buckets.move_to_end(name)
        while len(self._buckets) > self.max_entries:
            self._buckets.popitem(last=False)

    def __len__(self) -> int:
        return len(self._buckets)


def client_address(host: str | None) -> str:
    """The name an address is throttled under: IPv4 as is, IPv6 by its /64."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]  # not an IP (a test client, a unix socket)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def key_id_of(token: str) -> str | None:
    """The key id a token names (``fm_<id>_<secret>``), or None for a malformed one."""
    match = _KEY_ID.match(token.strip())
    return match.group(1) if match else None


class Throttle:
    """The rules above: ``admit`` before a key check, ``failed`` or ``succeeded`` after."""

    def __init__(
        self,
        settings: ThrottleSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings = settings or KBConfig().service.throttle
        self.clock = clock
        window, cap = settings.window_seconds, settings.max_entries
        self.addresses = FailureBuckets(settings.failures_per_address, window, cap, clock)
        self.key_ids = FailureBuckets(settings.failures_per_key, window, cap, clock)
        self._trusted: OrderedDict[str, float] = OrderedDict()  # token digest → until
        self._lock = threading.Lock()

    def admit(self, host: str | None, token: str) -> tuple[float, str]:
        """``(0, "")`` when the token may be checked, else the seconds to wait and why."""
        digest = _digest(token)
        address = client_address(host)
        key_id = key_id_of(token)
        with self._lock:
            if self._is_trusted(digest):
                return 0.0, ""
            wait = self.addresses.wait(address)
            if wait > 0:
                return wait, "too many failed API key checks from this address"
            if key_id is not None and not self.addresses.clean(address):
                wait = self.key_ids.wait(key_id)
                if wait > 0:
                    return wait, "too many failed checks of this API key id"
        return 0.0, ""

    def failed(self, host: str | None, token: str) -> float:
        """Count a failed check; the seconds to wait when its key id is under attack."""
        address = client_address(host)
        key_id = key_id_of(token)
        with self._lock:
            self._trusted.pop(_digest(token), None)  # revoked since: no longer trusted
            self.addresses.take(address)
            if key_id is None:
                return 0.0
            attacked = self.key_ids.wait(key_id) > 0
            self.key_ids.take(key_id)
            if not attacked and self.key_ids.wait(key_id) > 0:
                log.warning("API key id %s: failure budget spent; throttling its failures", key_id)
            return self.key_ids.wait(key_id) if attacked else 0.0

    def succeeded(self, token: str) -> None:
        """Trust this token for ``trusted_seconds`` (it will never be throttled)."""
        if self.settings.trusted_seconds <= 0:
            return
        digest = _digest(token)
        with self._lock:
            self._trusted[digest] = self.clock() + self.settings.trusted_seconds
            self._trusted.move_to_end(digest)
            while len(self._trusted) > self.settings.max_entries:
                self._trusted.popitem(last=False)

    def _is_trusted(self, digest: str) -> bool:
        until = self._trusted.get(digest)
        if until is None:
            return False
        if until < self.clock():
            del self._trusted[digest]
            return False
        return True


def _digest(token: str) -> str:
    """What is kept of a trusted token (never the token itself)."""
    return hashlib.sha256(token.strip().encode("utf-8", "replace")).hexdigest()
