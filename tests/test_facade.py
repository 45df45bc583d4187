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
        assert inspect.getdoc(twin) == inspect.getdoc(method), name  # one docstring for both


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


def test_every_method_body_is_a_short_delegation() -> None:
    """The facade hands each call to a stage object: no public method's body (past its
    docstring) is longer than a few statements, so orchestration lives in the engine."""
    import ast

    from flexmatch import knowledge_base

    tree = ast.parse(Path(knowledge_base.__file__).read_text(encoding="utf-8"))
    facade = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KnowledgeBase")
    long = [
        node.name
        for node in facade.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name not in ("__init__", "watch")  # watch: a closure per sync
        and len(node.body) - (ast.get_docstring(node) is not None) > 3
    ]
    assert long == []


def test_ray_options_follow_the_ray_parameter() -> None:
    from flexmatch.engine.ingest.fanout import RayOptions

    assert RayOptions.chosen(False, 2, 2) is None
    assert RayOptions.chosen(True, 3, 1) == RayOptions(address=None, workers=3, retries=1)
    assert RayOptions.chosen("", 2, 2) == RayOptions(address=None, workers=2, retries=2)
    assert RayOptions.chosen("auto", 2, 2) == RayOptions(address="auto", workers=2, retries=2)
