"""Two replicas sharing a state database on a real PostgreSQL server (the one
``scripts/postgres`` runs; skipped without it) never run one source's sync at once, as in
``test_schedule`` on SQLite."""

from __future__ import annotations

from pathlib import Path

from flexmatch.engine.embedders import OnnxEmbedder
from tests.adapters.http.test_schedule import two_replicas_sync_one_source_once


def test_two_replicas_on_postgresql_never_run_one_source_at_once(
    postgres_url: str, tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    two_replicas_sync_one_source_once(tmp_path, embedder, postgres_url)
