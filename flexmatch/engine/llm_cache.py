"""A persistent cache of LLM results, so a re-run pays for nothing twice.

Keyed on everything that can change an answer: the model, the server it is asked on
(``api_base``), the rendered prompt and the call parameters. litellm's own caches do not
work offline here, and a SQLite file in the knowledge base survives restarts. The file
holds prompts built from the documents, so it is its owner's alone (600, as are the
journal files SQLite makes next to it, which take the database's mode).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from flexmatch.engine.folders import private_folder
from flexmatch.engine.sqlite_wal import BUSY_TIMEOUT, prepare


def cache_key(
    model: str,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    api_base: str | None = None,
) -> str:
    blob = json.dumps(
        {"model": model, "api_base": api_base, "messages": messages, "params": params},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _owner_only(path: Path) -> None:
    """Create the database 600 (SQLite gives its -wal and -shm files the same mode), and
    narrow a cache made before to it."""
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(name, 0o600)


class LLMCache:
    """Key → (text, usage) in SQLite; ``path=None`` keeps it in memory."""

    def __init__(self, path: Path | None) -> None:
        if path is not None:
            private_folder(path.parent)
            _owner_only(path)
        self._db = sqlite3.connect(
            str(path) if path else ":memory:", timeout=BUSY_TIMEOUT, check_same_thread=False
        )
        prepare(self._db)
        # no fsync per answer (each one cost the event loop a disk flush): WAL with
        # synchronous=NORMAL survives a crash of the process; a power cut may lose the
        # last answers, which only means asking for them again
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS llm_cache "
            "(key TEXT PRIMARY KEY, text TEXT NOT NULL, usage TEXT NOT NULL)"
        )
        self._db.commit()

    def get(self, key: str) -> tuple[str, dict[str, Any]] | None:
        row = self._db.execute("SELECT text, usage FROM llm_cache WHERE key = ?", (key,)).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def put(self, key: str, text: str, usage: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO llm_cache (key, text, usage) VALUES (?, ?, ?)",
            (key, text, json.dumps(usage)),
        )
        self._db.commit()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0])

    def close(self) -> None:
        self._db.close()
