"""One identity per file, through the real CLI: a file reached through a folder walk or
named by its path is one document with one version, so alternating the routes costs
nothing ("unchanged" each time after the first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.testing import FakeLLMServer
from tests.conftest import run


def _env(llm_server: FakeLLMServer) -> dict[str, str]:
    return {
        "FLEXMATCH_LLM": "openai/fake",
        "FLEXMATCH_LLM_API_BASE": llm_server.base_url,
        "FLEXMATCH_LLM_API_KEY": "k",
    }


def _ingest(kb: Path, target: Path, env: dict[str, str], cwd: Path) -> dict[str, object]:
    result = run("ingest", "--kb", str(kb), "--json", str(target), env=env, cwd=cwd)
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    return report


@pytest.mark.parametrize("order", ["folder-first", "path-first"])
def test_folder_and_path_routes_are_one_unchanged_document(
    tmp_path: Path, llm_server: FakeLLMServer, order: str
) -> None:
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    page = docs / "guide" / "harbour.md"
    page.write_text("# The harbour\n\nThe harbour opens at six o'clock every day.\n")
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    env = _env(llm_server)
    # the folder by an absolute path, the file relative to the working folder
    folder, named = docs, Path("docs/guide/harbour.md")
    routes = [folder, named, folder] if order == "folder-first" else [named, folder, named]
    first = _ingest(kb, routes[0], env, tmp_path)
    assert first["added"] == 1
    calls = llm_server.successful_calls()
    for target in routes[1:]:
        report = _ingest(kb, target, env, tmp_path)
        assert (report["added"], report["changed"], report["unchanged"]) == (0, 0, 1), target
    assert llm_server.successful_calls() == calls  # nothing paid after the first run

    with KnowledgeBase.open(kb, env={}) as base:
        (record,) = base.list_documents()
    assert record.uri == str(page.resolve())
    # the place in the folder walked is kept once known, whichever route came last
    assert record.metadata["path"] == "guide/harbour.md"


def test_an_edit_is_seen_by_either_route(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "orchard.md"
    page.write_text("# The orchard\n\nThe orchard opens at six o'clock.\n")
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    env = _env(llm_server)
    assert _ingest(kb, docs, env, tmp_path)["added"] == 1
    page.write_text("# The orchard\n\nThe orchard opens at seven o'clock.\n")
    report = _ingest(kb, page, env, tmp_path)
    assert (report["added"], report["changed"]) == (0, 1)
    assert _ingest(kb, docs, env, tmp_path)["unchanged"] == 1
    with KnowledgeBase.open(kb, env={}) as base:
        (record,) = base.list_documents()
    assert record.metadata["path"] == "orchard.md"  # kept through the re-index by its path
