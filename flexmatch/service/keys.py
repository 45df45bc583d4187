"""API keys: a tenant scope and permissions each, stored hashed in the knowledge base.

A key reads ``fm_<id>_<secret>``. The id finds the row; only the SHA-256 of the secret
is stored, and it is compared with ``hmac.compare_digest``. The secret is 256 random
bits, so a plain hash is enough (a slow KDF guards guessable passwords, not these).

They live in the service's state database (``flexmatch.service.state_db``): by default the file
``<kb>/.flexmatch/keys.sqlite``, or the database at ``service.state_url`` that every
replica shares. It never touches the vector store, so ``flexmatch keys ...`` works while
a server holds the knowledge base open, and a server reads it on every request (no
cache), so a revoked key stops working at once, on every replica.

Key names are notes for people, so they are short (``NAME_MAX`` characters) and hold no
control or format characters (which could rewrite a terminal or reorder the text a
``keys list`` shows). A tenant holds at most ``MAX_ACTIVE_KEYS`` active keys (revoked ones
do not count), so one admin key cannot grow the state database without bound.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import unicodedata
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Literal, get_args

from pydantic import BaseModel, Field

from flexmatch.access import Principal
from flexmatch.config import KBConfig, load_config
from flexmatch.errors import ConfigError, KeyRequestError
from flexmatch.service.state_db import (
    STATE_FILE,
    Database,
    SqliteDatabase,
    open_database,
    state_file_for,
)

Permission = Literal["read", "write", "admin", "feedback"]
"""``feedback``: mark results helpful or not (it changes what others find, so ``read``
alone does not grant it); ``admin`` grants everything."""
PERMISSIONS: tuple[str, ...] = get_args(Permission)
KEYS_FILE = STATE_FILE
PREFIX = "fm"
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEY_ID = re.compile(r"^[0-9a-f]{12}$")
_COLUMNS = "id, tenant, permissions, name, created_at, revoked, revoked_at, identity"
_FROM = "api_keys LEFT JOIN key_identities ON key_identities.key_id = api_keys.id"
NAME_MAX = 200
"""The longest key name, in characters."""
MAX_ACTIVE_KEYS = 1000
"""The most active (not revoked) keys one tenant may hold."""


def grants(permissions: Iterable[str], *wanted: str) -> bool:
    """Whether ``permissions`` include one of ``wanted``: the one place that says
    ``admin`` may do everything in its tenant (the HTTP API, the console and the MCP
    server all ask here)."""
    held = set(permissions)
    return "admin" in held or not held.isdisjoint(wanted)


class KeyIdentity(BaseModel):
    """Who a key reads documents as (see docs/security.md, "Access control"): a person
    (``user`` and ``groups``), or a trusted ``service`` that names the end user on each
    request. A key with none reads only what its whole tenant may (admin keys: all)."""

    user: str | None = None
    groups: list[str] = Field(default_factory=list)
    service: bool = False

    def principal(self) -> Principal:
        return Principal(user=self.user, groups=tuple(self.groups))


def key_identity(
    principal: str | None = None, groups: Iterable[str] = (), *, service: bool = False
) -> KeyIdentity | None:
    """``--principal user:alice --group eng`` or ``--service`` as a ``KeyIdentity`` (None
    for neither), or a ``KeyRequestError`` naming what is wrong."""
    groups = list(groups)
    if service and (principal or groups):
        raise KeyRequestError("a service key names its users per request: no --principal/--group")
    if not (service or principal or groups):
        return None
    if principal is not None and not principal.startswith("user:"):
        raise KeyRequestError(f"--principal {principal[:80]!r} must be 'user:NAME'")
    try:
        bound = Principal.parse(principal, groups)
    except ConfigError as exc:
        raise KeyRequestError(str(exc)) from None
    return KeyIdentity(user=bound.user, groups=list(bound.groups), service=service)


class ApiKey(BaseModel):
    """A stored key, without its secret."""

    id: str
    tenant: str
    permissions: list[Permission]
    name: str = ""
    created_at: str
    revoked: bool = False
    revoked_at: str | None = None
    identity: KeyIdentity | None = None

    def reader(self, named: Principal | None) -> Principal | None:
        """Who this key's request reads as; ``named``: the end user the request names
        (the ``X-FlexMatch-Principal`` header). ``None`` means everything (an admin key
        naming nobody). A missing identity never widens access: an unbound key, or a
        service key naming nobody, reads as ``Principal()`` (what the whole tenant may
        read); a person's key may not name anyone else (``KeyRequestError``)."""
        if grants(self.permissions, "admin"):
            return named  # an admin sees everything, or searches as someone to check
        identity = self.identity or KeyIdentity()
        if identity.service:
            return named or Principal()
        bound = identity.principal()
        if named is not None and named != bound:
            raise KeyRequestError(
                f"this API key reads as {bound.label()}; only a service or admin key may "
                "name another principal"
            )
        return bound

    def writer(self, named: Principal | None) -> Principal | None:
        """Who this key's request writes as: ``None`` (everything) for an admin key, else
        its reader (``reader``), which may replace or remove only documents it may read."""
        if grants(self.permissions, "admin"):
            return None
        return self.reader(named) or Principal()

    def allows(self, permission: Permission) -> bool:
        """``admin`` may do everything in its tenant; otherwise the permission is listed."""
        return grants(self.permissions, permission)


def keys_file_for(kb_dir: str | Path) -> Path:
    return state_file_for(kb_dir)


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


def check_name(name: str) -> str:
    """The name without surrounding spaces; refused when too long or holding a control or
    format character (a terminal escape, a bidi override), naming the first one."""
    name = name.strip()
    if len(name) > NAME_MAX:
        raise KeyRequestError(
            f"key name is {len(name):,} characters long; at most {NAME_MAX} are allowed"
        )
    for position, char in enumerate(name):
        if unicodedata.category(char) in ("Cc", "Cf", "Cs"):
            raise KeyRequestError(
                f"key name holds the control character U+{ord(char):04X} at position "
                f"{position}; use printable text"
            )
    return name


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class KeyStore:
    """The API keys of one knowledge base (or of every replica sharing a state database)."""

    NAME_MAX: ClassVar[int] = NAME_MAX  # for the adapters, which see only ``flexmatch``

    def __init__(self, database: Database | Path, *, max_active: int = MAX_ACTIVE_KEYS) -> None:
        self.database = SqliteDatabase(database) if isinstance(database, Path) else database
        self.max_active = max_active

    @property
    def path(self) -> Path | None:
        """The SQLite file the keys are in (None for a database by URL)."""
        return self.database.path

    @classmethod
    def for_kb(cls, kb_dir: str | Path, config: KBConfig | None = None) -> KeyStore:
        """The keys ``kb_dir``'s servers accept: at its ``service.state_url`` when set
        (``config``, or its ``flexmatch.yaml``), else in its own folder."""
        folder = Path(kb_dir).expanduser().resolve()
        url = (config or load_config(folder)).service.state_url
        return cls(open_database(folder, url))

    def create(
        self,
        tenant: str,
        permissions: str | Iterable[str],
        name: str = "",
        identity: KeyIdentity | None = None,
    ) -> tuple[ApiKey, str]:
        """A new key and its token; the token is shown once and never stored. A
        ``KeyRequestError`` when the tenant already holds ``max_active`` active keys.
        ``identity``: who it reads documents as (see ``KeyIdentity``)."""
        key = ApiKey(
            id=secrets.token_hex(6),
            tenant=check_tenant(tenant),
            permissions=parse_permissions(permissions),
            name=check_name(name),
            created_at=_now(),
            identity=identity,
        )
        secret = secrets.token_urlsafe(32)
        # one statement counts and inserts, so concurrent creates cannot both pass the cap
        with self.database.transaction() as db:
            assert db is not None  # create=True: the database is made when missing
            inserted = db.execute(
                "INSERT INTO api_keys (id, secret_sha256, tenant, permissions, name, created_at)"
                " SELECT :id, :digest, :tenant, :permissions, :name, :created_at"
                " WHERE (SELECT COUNT(*) FROM api_keys"
                " WHERE tenant = :counted AND revoked = 0) < :cap",
                {
                    "id": key.id,
                    "digest": _digest(secret),
                    "tenant": key.tenant,
                    "permissions": ",".join(key.permissions),
                    "name": key.name,
                    "created_at": key.created_at,
                    "counted": key.tenant,  # its own name: PostgreSQL types each once
                    "cap": self.max_active,
                },
            ).rowcount
            if inserted and identity is not None:
                db.execute(
                    "INSERT INTO key_identities (key_id, identity) VALUES (:id, :identity)",
                    {"id": key.id, "identity": identity.model_dump_json()},
                )
        if not inserted:
            raise KeyRequestError(
                f"tenant '{key.tenant}' already has {self.max_active} active keys, the most "
                "allowed; revoke unused ones first"
            )
        return key, f"{PREFIX}_{key.id}_{secret}"

    def list(self, tenant: str | None = None) -> list[ApiKey]:
        """Every key (or one tenant's), oldest first, revoked ones included."""
        order = self.database.insertion_order
        with self.database.transaction(create=False) as db:
            if db is None:
                return []
            if tenant is None:
                rows = db.execute(f"SELECT {_COLUMNS} FROM {_FROM} ORDER BY api_keys.{order}").rows
            else:
                rows = db.execute(
                    f"SELECT {_COLUMNS} FROM {_FROM} WHERE tenant = :tenant "
                    f"ORDER BY api_keys.{order}",
                    {"tenant": tenant},
                ).rows
        return [_key(row) for row in rows]

    def get(self, key_id: str, tenant: str | None = None) -> ApiKey | None:
        if not _KEY_ID.match(key_id):
            return None
        with self.database.transaction(create=False) as db:
            if db is None:
                return None
            rows = db.execute(f"SELECT {_COLUMNS} FROM {_FROM} WHERE id = :id", {"id": key_id}).rows
        keys = [_key(row) for row in rows]
        return next((k for k in keys if tenant is None or k.tenant == tenant), None)

    def revoke(self, key_id: str, tenant: str | None = None) -> bool:
        """Revoke a key (only within ``tenant`` when given); False if there is no such key."""
        if not _KEY_ID.match(key_id):
            return False
        sql = "UPDATE api_keys SET revoked = 1, revoked_at = COALESCE(revoked_at, :now)"
        sql += " WHERE id = :id"
        params = {"now": _now(), "id": key_id}
        if tenant is not None:
            sql += " AND tenant = :tenant"
            params["tenant"] = tenant
        with self.database.transaction(create=False) as db:
            if db is None:
                return False
            return db.execute(sql, params).rowcount > 0

    def verify(self, token: str) -> ApiKey | None:
        """The key a token belongs to, or None when it is malformed, unknown or revoked."""
        parts = token.strip().split("_", 2)
        if len(parts) != 3 or parts[0] != PREFIX or not _KEY_ID.match(parts[1]) or not parts[2]:
            return None
        with self.database.transaction(create=False) as db:
            rows = (
                db.execute(
                    f"SELECT {_COLUMNS}, secret_sha256 FROM {_FROM} WHERE id = :id",
                    {"id": parts[1]},
                ).rows
                if db is not None
                else []
            )
        if not rows:
            # same work as a hit, so timing does not tell which ids exist
            hmac.compare_digest(_digest(parts[2]), _digest(""))
            return None
        row = rows[0]
        matches = hmac.compare_digest(_digest(parts[2]), row[8])
        key = _key(row[:8])
        return key if matches and not key.revoked else None


def _key(row: tuple) -> ApiKey:
    key_id, tenant, permissions, name, created_at, revoked, revoked_at, identity = row
    return ApiKey(
        identity=KeyIdentity.model_validate_json(identity) if identity else None,
        id=key_id,
        tenant=tenant,
        permissions=[p for p in permissions.split(",") if p],
        name=name,
        created_at=created_at,
        revoked=bool(revoked),
        revoked_at=revoked_at,
    )
