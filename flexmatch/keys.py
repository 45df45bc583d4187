"""API keys: a tenant scope and permissions each, stored hashed in the knowledge base.

A key reads ``fm_<id>_<secret>``. The id finds the row; only the SHA-256 of the secret
is stored, and it is compared with ``hmac.compare_digest``. The secret is 256 random
bits, so a plain hash is enough (a slow KDF guards guessable passwords, not these).

The file is ``<kb>/.flexmatch/keys.sqlite``. It never touches the vector store, so
``flexmatch keys ...`` works while a server holds the knowledge base open, and a server
reads it on every request, so a revoked key stops working at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel

from flexmatch.errors import KeyRequestError

Permission = Literal["read", "write", "admin"]
PERMISSIONS: tuple[str, ...] = get_args(Permission)
KEYS_FILE = Path(".flexmatch") / "keys.sqlite"
PREFIX = "fm"
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEY_ID = re.compile(r"^[0-9a-f]{12}$")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,
    tenant TEXT NOT NULL,
    permissions TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0,
    revoked_at TEXT
)
"""


class ApiKey(BaseModel):
    """A stored key, without its secret."""

    id: str
    tenant: str
    permissions: list[Permission]
    name: str = ""
    created_at: str
    revoked: bool = False
    revoked_at: str | None = None

    def allows(self, permission: Permission) -> bool:
        """``admin`` may do everything in its tenant; otherwise the permission is listed."""
        return permission in self.permissions or "admin" in self.permissions


def keys_file_for(kb_dir: str | Path) -> Path:
    return Path(kb_dir).expanduser().resolve() / KEYS_FILE


def parse_permissions(value: str | Iterable[str]) -> list[Permission]:
    """``"read,write"`` or a list → the permissions, checked, deduplicated, in order."""
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [item.strip().lower() for item in items if item.strip()]
    unknown = [name for name in names if name not in PERMISSIONS]
    if unknown or not names:
        raise KeyRequestError(
            f"permissions must be a non-empty list of {', '.join(PERMISSIONS)}"
            + (f" (got {', '.join(unknown)})" if unknown else "")
        )
    return list(dict.fromkeys(names))  # type: ignore[arg-type]


def check_tenant(tenant: str) -> str:
    if not _TENANT.match(tenant):
        raise KeyRequestError(
            f"tenant '{tenant}' is not valid: 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return tenant


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class KeyStore:
    """The API keys of one knowledge base, in a small SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def for_kb(cls, kb_dir: str | Path) -> KeyStore:
        return cls(keys_file_for(kb_dir))

    @contextlib.contextmanager
    def _connect(self, *, create: bool = False) -> Iterator[sqlite3.Connection | None]:
        if not self.path.exists():
            if not create:
                yield None
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)  # owner-only from the start
            os.close(fd)
        connection = sqlite3.connect(self.path, timeout=10)
        try:
            with connection:
                connection.execute(_SCHEMA)
                yield connection
        finally:
            connection.close()

    def create(
        self, tenant: str, permissions: str | Iterable[str], name: str = ""
    ) -> tuple[ApiKey, str]:
        """A new key and its token; the token is shown once and never stored."""
        key = ApiKey(
            id=secrets.token_hex(6),
            tenant=check_tenant(tenant),
            permissions=parse_permissions(permissions),
            name=name.strip()[:200],
            created_at=_now(),
        )
        secret = secrets.token_urlsafe(32)
        with self._connect(create=True) as db:
            assert db is not None
            db.execute(
                "INSERT INTO api_keys (id, secret_sha256, tenant, permissions, name, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key.id,
                    _digest(secret),
                    key.tenant,
                    ",".join(key.permissions),
                    key.name,
                    key.created_at,
                ),
            )
        return key, f"{PREFIX}_{key.id}_{secret}"

    def list(self, tenant: str | None = None) -> list[ApiKey]:
        """Every key (or one tenant's), oldest first, revoked ones included."""
        with self._connect() as db:
            if db is None:
                return []
            sql = "SELECT id, tenant, permissions, name, created_at, revoked, revoked_at"
            sql += " FROM api_keys"
            rows = (
                db.execute(sql + " WHERE tenant = ? ORDER BY rowid", (tenant,))
                if tenant is not None
                else db.execute(sql + " ORDER BY rowid")
            ).fetchall()
        return [_key(row) for row in rows]

    def get(self, key_id: str, tenant: str | None = None) -> ApiKey | None:
        return next((k for k in self.list(tenant) if k.id == key_id), None)

    def revoke(self, key_id: str, tenant: str | None = None) -> bool:
        """Revoke a key (only within ``tenant`` when given); False if there is no such key."""
        if not _KEY_ID.match(key_id):
            return False
        with self._connect() as db:
            if db is None:
                return False
            sql = "UPDATE api_keys SET revoked = 1, revoked_at = COALESCE(revoked_at, ?)"
            sql += " WHERE id = ?"
            params: tuple[str, ...] = (_now(), key_id)
            if tenant is not None:
                sql += " AND tenant = ?"
                params += (tenant,)
            return db.execute(sql, params).rowcount > 0

    def verify(self, token: str) -> ApiKey | None:
        """The key a token belongs to, or None when it is malformed, unknown or revoked."""
        parts = token.strip().split("_", 2)
        if len(parts) != 3 or parts[0] != PREFIX or not _KEY_ID.match(parts[1]) or not parts[2]:
            return None
        with self._connect() as db:
            if db is None:
                return None
            row = db.execute(
                "SELECT id, tenant, permissions, name, created_at, revoked, revoked_at,"
                " secret_sha256 FROM api_keys WHERE id = ?",
                (parts[1],),
            ).fetchone()
        if row is None:
            # same work as a hit, so timing does not tell which ids exist
            hmac.compare_digest(_digest(parts[2]), _digest(""))
            return None
        matches = hmac.compare_digest(_digest(parts[2]), row[7])
        key = _key(row[:7])
        return key if matches and not key.revoked else None


def _key(row: tuple) -> ApiKey:
    key_id, tenant, permissions, name, created_at, revoked, revoked_at = row
    return ApiKey(
        id=key_id,
        tenant=tenant,
        permissions=[p for p in permissions.split(",") if p],
        name=name,
        created_at=created_at,
        revoked=bool(revoked),
        revoked_at=revoked_at,
    )
