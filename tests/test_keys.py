"""API keys: stored hashed, scoped to a tenant, revocable, and never shown twice."""

from __future__ import annotations

import re
import sqlite3
import stat
from pathlib import Path

import pytest

from flexmatch.service.keys import (
    MAX_ACTIVE_KEYS,
    NAME_MAX,
    KeyRequestError,
    KeyStore,
    keys_file_for,
    parse_permissions,
)


def test_create_verify_and_store_only_a_hash(tmp_path: Path) -> None:
    store = KeyStore.for_kb(tmp_path)
    key, token = store.create("acme", "read,write", "ci bot")
    assert store.path == tmp_path / ".flexmatch" / "keys.sqlite" == keys_file_for(tmp_path)
    prefix, key_id, secret = token.split("_", 2)
    assert prefix == "fm" and key_id == key.id and len(secret) >= 40
    verified = store.verify(token)
    assert verified is not None and verified.tenant == "acme"
    assert verified.permissions == ["read", "write"] and verified.name == "ci bot"
    assert secret.encode() not in store.path.read_bytes()
    with sqlite3.connect(store.path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(api_keys)")]
    assert "secret_sha256" in columns and "secret" not in columns
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600


def test_bad_tokens_are_refused(tmp_path: Path) -> None:
    store = KeyStore.for_kb(tmp_path)
    assert store.verify("fm_0123456789ab_whatever") is None  # no file yet
    _, token = store.create("acme", "read")
    for bad in (
        "",
        "fm",
        token + "x",
        token[:-1],
        token.replace("fm_", "xx_", 1),
        "fm_0123456789ab_" + token.split("_", 2)[2],
        "fm__" + token.split("_", 2)[2],
    ):
        assert store.verify(bad) is None, bad


def test_list_and_revoke_by_tenant(tmp_path: Path) -> None:
    store = KeyStore.for_kb(tmp_path)
    a, token_a = store.create("a", "read")
    b, _ = store.create("b", "admin")
    assert [k.id for k in store.list()] == [a.id, b.id]
    assert [k.id for k in store.list("a")] == [a.id]
    assert not store.revoke(a.id, tenant="b")  # another tenant's key
    assert store.verify(token_a) is not None
    assert store.revoke(a.id) and store.verify(token_a) is None
    revoked = store.get(a.id)
    assert revoked is not None and revoked.revoked and revoked.revoked_at
    assert not store.revoke("not-an-id") and not store.revoke("ffffffffffff")


def test_permissions_and_tenants_are_checked(tmp_path: Path) -> None:
    assert parse_permissions("read, WRITE,read") == ["read", "write"]
    for bad in ("", "root", "read,delete"):
        with pytest.raises(KeyRequestError):
            parse_permissions(bad)
    store = KeyStore.for_kb(tmp_path)
    for tenant in ("", "has space", "_hidden", "x" * 65, "a/b"):
        with pytest.raises(KeyRequestError):
            store.create(tenant, "read")
    key, _ = store.create("admins", "admin")
    assert key.allows("write") and key.allows("read")


def test_names_are_short_printable_text(tmp_path: Path) -> None:
    store = KeyStore.for_kb(tmp_path)
    key, _ = store.create("acme", "read", "  " + "n" * NAME_MAX + "  ")
    assert key.name == "n" * NAME_MAX  # surrounding spaces do not count
    with pytest.raises(KeyRequestError, match="1,000,000 characters long; at most 200"):
        store.create("acme", "read", "n" * 1_000_000)
    for bad, code in (
        ("\x1b]0;pwn\x07", "U+001B"),
        ("line\nbreak", "U+000A"),
        ("nul\x00", "U+0000"),
        ("evil\u202etxt.exe", "U+202E"),  # a bidi override reorders what is shown
    ):
        with pytest.raises(KeyRequestError, match=re.escape(code)):
            store.create("acme", "read", bad)
    assert [k.name for k in store.list("acme")] == ["n" * NAME_MAX]  # nothing else stored
    assert store.create("acme", "read", "Zoë's bot ✓")[0].name == "Zoë's bot ✓"


def test_active_keys_per_tenant_are_capped(tmp_path: Path) -> None:
    assert MAX_ACTIVE_KEYS == 1000
    store = KeyStore(keys_file_for(tmp_path), max_active=3)
    first = [store.create("acme", "read")[0] for _ in range(3)]
    with pytest.raises(KeyRequestError, match="'acme' already has 3 active keys"):
        store.create("acme", "read")
    assert len(store.list("acme")) == 3  # the refused key was not stored
    store.create("other", "read")  # another tenant has its own allowance
    assert store.revoke(first[0].id)  # revoked keys do not count
    store.create("acme", "read")
    with pytest.raises(KeyRequestError):
        store.create("acme", "read")
    assert KeyStore.for_kb(tmp_path / "kb").max_active == MAX_ACTIVE_KEYS  # the HTTP test fills it
