"""Console sessions: a signed-in API key, kept on the server behind a random cookie.

The browser holds only a random session id (HttpOnly, SameSite=Strict; over https
Secure and ``__Host-`` prefixed, so no page of another origin can set one). Over plain
http any page on the same host (another port) or a sibling subdomain can set the cookie
to a session of its own (cookie tossing, to sign the victim into the attacker's tenant);
there a session is bound to the address it signed in from and a request carrying two
session cookies is signed out, which stops a toss from another address but not one from
the victim's own (a shared NAT). Only https closes it. The key itself
stays in this process's memory, so every request checks it exactly as the REST API does
(valid, not revoked, within its rate limit): revoking a key ends its sessions at once.
Each session has its own CSRF token, which every POST must send back. A restart signs
everyone out; that is the price of never putting a key in a cookie.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "fm_console"
SIGNIN_COOKIE = "fm_console_signin"  # the sign-in form's CSRF token (double submit)
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
PATH = "/console"
HOST_PREFIX = "__Host-"


def cookie_name(base: str, secure: bool) -> str:
    """The cookie's name: over https ``__Host-`` prefixed, which browsers accept only when
    set by this very origin over https (Secure, Path=/, no Domain), so no other page can
    toss one in or overwrite it. Only that fully protects a session: over plain http a
    page on another port of the host or on a sibling subdomain can overwrite the cookie;
    there the origin check (``web.check_origin``) keeps other sites' forms out, and a
    session works only from the address it signed in from (``Session.address``)."""
    return HOST_PREFIX + base if secure else base


def cookie_path(secure: bool) -> str:
    """``__Host-`` cookies must have Path=/; plain ones stay on the console's paths."""
    return "/" if secure else PATH


@dataclass
class Session:
    """One signed-in browser: its key (never sent back) and its CSRF token."""

    id: str
    token: str
    csrf: str
    created: float
    seen: float
    address: str | None = None  # over plain http: the only client address it works from


class SessionStore:
    """Sessions in memory, ended after ``idle`` seconds unused or ``lifetime`` in all."""

    def __init__(
        self,
        idle: float = 2 * 3600,
        lifetime: float = 12 * 3600,
        max_sessions: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle = idle
        self.lifetime = lifetime
        self.max_sessions = max_sessions
        self.clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def create(self, token: str, address: str | None = None) -> Session:
        """A new session for a checked key (a new id every time: no fixation), bound to
        ``address`` when given."""
        now = self.clock()
        session = Session(
            id=secrets.token_urlsafe(32),
            token=token,
            csrf=secrets.token_urlsafe(32),
            created=now,
            seen=now,
            address=address,
        )
        with self._lock:
            self._sessions[session.id] = session
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)  # the least recently used goes first
        return session

    def get(self, session_id: str | None, address: str | None = None) -> Session | None:
        """The live session with this id, or None (an expired one is ended; one bound to
        another address than ``address`` is left alone: a tossed cookie does not end it)."""
        if not session_id:
            return None
        now = self.clock()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.seen > self.idle or now - session.created > self.lifetime:
                del self._sessions[session_id]
                return None
            if session.address is not None and session.address != address:
                return None
            session.seen = now
            self._sessions.move_to_end(session_id)
            return session

    def end(self, session_id: str | None) -> None:
        with self._lock:
            self._sessions.pop(session_id or "", None)

    def __len__(self) -> int:
        return len(self._sessions)


def same_token(sent: str | None, expected: str) -> bool:
    """A constant-time comparison of a CSRF token (a missing one never matches)."""
    return bool(sent) and hmac.compare_digest(str(sent).encode(), expected.encode())


def new_token() -> str:
    return secrets.token_urlsafe(32)
