"""API keys: stored hashed, scoped to a tenant, revocable, and never shown twice."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from flexmatch.keys import KeyRequestError, KeyStore, keys_file_for, parse_permissions


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
