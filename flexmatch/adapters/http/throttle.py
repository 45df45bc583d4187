"""Throttling of failed API key checks and console sign-ins, per client address and key id.

Keys are 256-bit random secrets, so guessing one is hopeless anyway: this is the defence
in depth a shared service is expected to have, and it stops a flood of bad keys from
costing a database read each. The rules, for a request that carries a key:

1. A token that passed a check on this process within ``trusted_seconds`` is checked as
   always (revocation stays immediate) and never throttled. So a valid client keeps
   working from an address an attacker shares (a NAT, an office proxy), and an owner is
   not locked out of a key id that someone else is guessing at.
2. Each client address (IPv6 by its /64, which one host usually holds whole) may fail
   ``failures_per_address`` times in a burst; the budget comes back over
   ``window_seconds`` (a token bucket). An IPv6 /48 (one site) has ``NETWORK_FACTOR``
   times that budget, so a host holding many /64s does not get a fresh budget with
   each. Once spent, a token from that address is refused with 429 and ``Retry-After``
   before it is checked, unless its key id exists and has no recent failure: then it is
   checked (the valid keys behind a shared address, a NAT or a proxy, are not locked out
   by a neighbour's bad key after a restart), and its failure is answered 429 as well.
3. Each key id that exists may fail ``failures_per_key`` times, from all addresses
   together (an id that does not exist can never succeed, so it has no bucket: made-up
   ids cannot crowd out the bucket of an id under attack). Once spent the id is under
   attack: an address that failed within ``window_seconds`` is refused before its check,
   while an address with a clean record is still checked (its owner can sign in) and a
   failure there is answered 429 too. This is what an attack spread over many addresses
   meets; throttling the id for everyone would let anyone lock its owner out (the
   lockout denial of service OWASP and django-axes warn about). Recent failures are kept
   apart from the budget, so ``failures_per_address: 0`` leaves this rule on.

``admit`` takes one failure from each budget before the check (so concurrent checks
cannot overspend one) and a success gives it back; a success never refills more (else
an attacker would interleave a key of their own). A budget may go below zero, down to
minus itself, when checks are let through a spent budget (rules 2 and 3).

The address is the one the server sees: behind a reverse proxy, uvicorn takes it from
``X-Forwarded-For`` only when the proxy is in ``FORWARDED_ALLOW_IPS`` (else every client
shares the proxy's budget; a warning is logged when such a shared budget runs out).

Everything is in this process's memory: each replica, and each worker process of one,
keeps its own budgets. Each table (addresses, networks, key ids, recent failures,
trusted tokens) holds at most ``max_entries`` entries; a full table drops refilled
entries first, then the fullest, and logs that it was full of live ones.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from flexmatch import KBConfig

log = logging.getLogger("flexmatch.adapters.http")
_KEY_ID = re.compile(r"^fm_([0-9a-f]{12})_")
NETWORK_FACTOR = 8  # an IPv6 /48's budget, in address budgets
KNOWN_IDS_SECONDS = 10.0  # how stale the cached set of existing key ids may be
WARN_EVERY_SECONDS = 60.0  # a table full of live entries is logged at most this often
UNKNOWN = "unknown"  # the address of a client the server cannot see (a unix socket)


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
    """A token bucket of failures per name, ``budget`` deep, refilled over ``window``.

    Tokens may go down to ``-budget`` (checks let through a spent budget). When the
    table passes ``max_entries`` it drops the entries that have refilled, and if that is
    not a tenth of them, the fullest live ones (the least harm), with a warning: evicting
    by age alone would hand a spent bucket back full to whoever fills the table."""

    def __init__(
        self,
        budget: int,
        window: float,
        max_entries: int,
        clock: Callable[[], float],
        what: str = "throttle",
    ) -> None:
        self.budget = budget
        self.rate = budget / window if budget else 0.0  # failures regained per second
        self.max_entries = max_entries
        self.clock = clock
        self.what = what
        self._buckets: dict[str, tuple[float, float]] = {}  # tokens, when
        self._warned: float | None = None  # when a full table was last logged
        self._dropped = 0  # live entries dropped since

    def tokens(self, name: str) -> float:
        return self._tokens(name, self.clock())

    def _tokens(self, name: str, now: float) -> float:
        tokens, last = self._buckets.get(name, (float(self.budget), now))
        return min(float(self.budget), tokens + (now - last) * self.rate)

    def wait(self, name: str | None) -> float:
        """Seconds until ``name`` may fail again (0: it may now)."""
        if not self.budget or name is None:
            return 0.0
        tokens = self.tokens(name)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def clean(self, name: str) -> bool:
        """Whether ``name`` has its whole budget (no failure it has not lived down)."""
        return not self.budget or self.tokens(name) >= self.budget

    def take(self, name: str | None) -> bool:
        """Count one failure of ``name``; True when this one spent its budget."""
        if not self.budget or name is None:
            return False
        now = self.clock()
        before = self._tokens(name, now)
        self._buckets[name] = (max(-float(self.budget), before - 1.0), now)
        if len(self._buckets) > self.max_entries:
            self._make_room(now)
        return before >= 1.0 > before - 1.0

    def give(self, name: str | None) -> None:
        """Give back a failure taken for a check that succeeded."""
        if not self.budget or name is None or name not in self._buckets:
            return
        now = self.clock()
        self._buckets[name] = (min(float(self.budget), self._tokens(name, now) + 1.0), now)

    def _make_room(self, now: float) -> None:
        full = float(self.budget)
        live = {n: t for n in self._buckets if (t := self._tokens(n, now)) < full}
        self._buckets = {n: v for n, v in self._buckets.items() if n in live}
        target = self.max_entries * 9 // 10
        if len(self._buckets) > target:
            fullest = sorted(live, key=live.__getitem__, reverse=True)
            dropped = fullest[: len(self._buckets) - target]
            for name in dropped:
                del self._buckets[name]
            self._dropped += len(dropped)
            if self._warned is None or now - self._warned >= WARN_EVERY_SECONDS:
                log.warning(
                    "%s: all %d entries have recent failures; dropped the %d fullest"
                    " (raise service.throttle.max_entries if this is not an attack)",
                    self.what,
                    self.max_entries,
                    self._dropped,
                )
                self._warned, self._dropped = now, 0

    def __len__(self) -> int:
        return len(self._buckets)


class RecentFailures:
    """When each address last failed, for ``window`` seconds, at most ``max_entries``
    (the oldest failure dropped first: it is the nearest to being forgotten anyway)."""

    def __init__(self, window: float, max_entries: int, clock: Callable[[], float]) -> None:
        self.window = window
        self.max_entries = max_entries
        self.clock = clock
        self._last: OrderedDict[str, float] = OrderedDict()

    def add(self, name: str) -> None:
        self._last[name] = self.clock()
        self._last.move_to_end(name)
        while len(self._last) > self.max_entries:
            self._last.popitem(last=False)

    def __contains__(self, name: object) -> bool:
        last = self._last.get(name) if isinstance(name, str) else None
        return last is not None and self.clock() - last < self.window

    def __len__(self) -> int:
        return len(self._last)


class KnownKeyIds:
    """The ids of the keys that exist, read from the key store at most every ``every``
    seconds (an id created since on another replica is unknown until then, which only
    matters to a client whose address has spent its budget)."""

    def __init__(
        self,
        load: Callable[[], Iterable[str]] | None,
        clock: Callable[[], float],
        every: float = KNOWN_IDS_SECONDS,
    ) -> None:
        self.load = load
        self.clock = clock
        self.every = every
        self._ids: frozenset[str] = frozenset()
        self._added: set[str] = set()  # passed a check here since the last load
        self._loaded: float | None = None
        self._loading = threading.Lock()

    @property
    def stale(self) -> bool:
        return self.load is not None and (
            self._loaded is None or self.clock() - self._loaded >= self.every
        )

    def refresh(self) -> None:
        """Read the ids again (a database read: call it off the event loop). Only one
        read at a time: checks arriving meanwhile go on with the ids read before."""
        if self.load is None or not self._loading.acquire(blocking=False):
            return
        try:
            when = self.clock()
            ids = frozenset(self.load())
            self._ids, self._added, self._loaded = ids, set(), when
        finally:
            self._loading.release()

    def add(self, key_id: str) -> None:
        self._added.add(key_id)

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._ids or key_id in self._added


def client_address(host: str | None) -> str:
    """The name an address is throttled under: IPv4 as is, IPv6 by its /64."""
    if not host:
        return UNKNOWN
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]  # not an IP (a test client, a unix socket)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def client_network(host: str | None) -> str | None:
    """The IPv6 /48 an address is in (None for IPv4 and everything else)."""
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return None
    if not isinstance(address, ipaddress.IPv6Address) or address.ipv4_mapped is not None:
        return None
    return str(ipaddress.IPv6Network((address, 48), strict=False))


def key_id_of(token: str) -> str | None:
    """The key id a token names (``fm_<id>_<secret>``), or None for a malformed one."""
    match = _KEY_ID.match(token.strip())
    return match.group(1) if match else None


@dataclass(frozen=True)
class Admission:
    """What ``admit`` decided. ``wait`` > 0: refused (``reason`` says why); else the
    failures it took, which ``succeeded`` gives back and ``failed`` keeps."""

    wait: float
    reason: str = ""
    token: str = ""
    address: str = UNKNOWN
    network: str | None = None
    key_id: str | None = None  # only an id that exists
    trusted: bool = False
    spent: bool = False  # let through a spent address budget: a failure is 429 too
    attacked: bool = False  # its key id's budget was spent: a failure is 429 too
    ran_out: bool = False  # this check took the address's last failure


class Throttle:
    """The rules above: ``admit`` before a key check, ``failed`` or ``succeeded`` after."""

    def __init__(
        self,
        settings: ThrottleSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        known_ids: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self.settings = settings = settings or KBConfig().service.throttle
        self.clock = clock
        window, cap = settings.window_seconds, settings.max_entries
        per_address = settings.failures_per_address
        self.addresses = FailureBuckets(per_address, window, cap, clock, "addresses")
        self.networks = FailureBuckets(
            per_address * NETWORK_FACTOR, window, cap, clock, "IPv6 /48 networks"
        )
        self.key_ids = FailureBuckets(settings.failures_per_key, window, cap, clock, "key ids")
        self.recent = RecentFailures(window, cap, clock)
        self.known = KnownKeyIds(known_ids, clock)
        self._trusted: OrderedDict[str, float] = OrderedDict()  # token digest → until
        self._lock = threading.Lock()

    def needs_known_ids(self, token: str) -> bool:
        """Whether ``known.refresh()`` should run (off the event loop) before ``admit``."""
        return self.known.stale and key_id_of(token) is not None and not self.trusted(token)

    def trusted(self, token: str) -> bool:
        with self._lock:
            return self._is_trusted(_digest(token))

    def address_wait(self, host: str | None) -> float:
        """Seconds until the address of ``host`` may fail again (0: it may now)."""
        with self._lock:
            return max(
                self.addresses.wait(client_address(host)),
                self.networks.wait(client_network(host)),
            )

    def admit(self, host: str | None, token: str) -> Admission:
        """Whether ``token`` may be checked now; if so, one failure is taken for it."""
        address, network = client_address(host), client_network(host)
        key_id = key_id_of(token)
        with self._lock:
            if self._is_trusted(_digest(token)):
                return Admission(0.0, token=token, address=address, trusted=True)
            if key_id not in self.known:
                key_id = None
            address_wait = max(self.addresses.wait(address), self.networks.wait(network))
            key_wait = self.key_ids.wait(key_id)
            spent = address_wait > 0
            if spent and not (key_id is not None and self.key_ids.clean(key_id)):
                return Admission(address_wait, "too many failed API key checks from this address")
            if key_wait > 0 and address in self.recent:
                return Admission(key_wait, "too many failed checks of this API key id")
            ran_out = self.addresses.take(address)
            self.networks.take(network)
            self.key_ids.take(key_id)
        return Admission(
            0.0,
            token=token,
            address=address,
            network=network,
            key_id=key_id,
            spent=spent,
            attacked=key_wait > 0,
            ran_out=ran_out,
        )

    def failed(self, admission: Admission) -> float:
        """Count a failed check (its failure was taken at ``admit``); the seconds to
        answer 429 with when the check was let through a spent budget, else 0."""
        with self._lock:
            self.recent.add(admission.address)
            if admission.trusted:  # revoked since: no longer trusted, and a failure
                self._trusted.pop(_digest(admission.token), None)
                self.addresses.take(admission.address)
                key_id = key_id_of(admission.token)
                self.key_ids.take(key_id if key_id in self.known else None)
                return 0.0
            key_id = admission.key_id
            if key_id is not None and not admission.attacked and self.key_ids.wait(key_id) > 0:
                log.warning("API key id %s: failure budget spent; throttling its failures", key_id)
            if admission.ran_out and _shared(admission.address):
                log.warning(
                    "client address %s spent its failed key check budget: new keys from"
                    " it wait (if it is a proxy, list it in FORWARDED_ALLOW_IPS)",
                    admission.address,
                )
            if admission.attacked:
                return max(self.key_ids.wait(key_id), 1e-3)
            if admission.spent:
                return max(self.addresses.wait(admission.address), 1e-3)
            return 0.0

    def succeeded(self, admission: Admission) -> None:
        """Give back the failure ``admit`` took, and trust the token for
        ``trusted_seconds`` (it will never be throttled)."""
        self.release(admission)
        with self._lock:
            key_id = key_id_of(admission.token)
            if key_id is not None:
                self.known.add(key_id)
            if self.settings.trusted_seconds <= 0:
                return
            digest = _digest(admission.token)
            self._trusted[digest] = self.clock() + self.settings.trusted_seconds
            self._trusted.move_to_end(digest)
            while len(self._trusted) > self.settings.max_entries:
                self._trusted.popitem(last=False)

    def release(self, admission: Admission) -> None:
        """Give back the failure ``admit`` took for a check that did not happen (the
        key store failed, the request was cancelled)."""
        with self._lock:
            if not admission.trusted:
                self.addresses.give(admission.address)
                self.networks.give(admission.network)
                self.key_ids.give(admission.key_id)

    def _is_trusted(self, digest: str) -> bool:
        until = self._trusted.get(digest)
        if until is None:
            return False
        if until < self.clock():
            del self._trusted[digest]
            return False
        return True


def _shared(address: str) -> bool:
    """Whether an address is likely shared by many clients: unknown (a unix socket), or
    loopback and private addresses (a proxy on this host or network)."""
    if address == UNKNOWN:
        return True
    try:
        network = ipaddress.ip_network(address, strict=False)
    except ValueError:
        return False
    return network.is_private or network.is_loopback


def _digest(token: str) -> str:
    """What is kept of a trusted token (never the token itself)."""
    return hashlib.sha256(token.strip().encode("utf-8", "replace")).hexdigest()
