"""The facade's shape: every public async method has a sync twin with its parameters, and
every public method says what it does."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from flexmatch import ConfigError, KnowledgeBase
from flexmatch.testing import memory_knowledge_base


def _public() -> dict[str, object]:
    return {
        name: member
        for name, member in inspect.getmembers(KnowledgeBase)
        if not name.startswith("_") and callable(member)
    }


def test_every_async_method_has_a_sync_twin_with_its_signature() -> None:
    public = _public()
    asynchronous = {n: m for n, m in public.items() if inspect.iscoroutinefunction(m)}
    assert {"aingest", "asearch", "aquery", "aformat", "areindex", "async_sync"} <= set(
        asynchronous
    )
    for name, method in asynchronous.items():
        twin = public.get(name.removeprefix("async_").removeprefix("a"))
        assert twin is not None, f"{name} has no sync twin"
        assert not inspect.iscoroutinefunction(twin), name
        assert inspect.signature(twin) == inspect.signature(method), name  # type: ignore[arg-type]


def test_every_public_method_has_a_docstring() -> None:
    undocumented = [n for n, m in _public().items() if not inspect.getdoc(m)]
    assert undocumented == []


def test_a_sync_twin_runs_its_method(tmp_path: Path) -> None:
    """``query`` is ``aquery`` run to its end: an empty query is refused the same way."""
    with (
        memory_knowledge_base(tmp_path) as kb,
        pytest.raises(ConfigError, match="the query is empty"),
    ):
        kb.query("  ", top_n=1)
