"""Context expansion (``expand``) through the served surfaces: the HTTP API (a real server:
the body and the query string, a bad value a 422 ``invalid_expand``), the remote
``Client`` and the ``flexmatch query`` command, each giving the answer the Python API gives.
The rules themselves are tested in tests/test_expand.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flexmatch import Client, KnowledgeBase, QueryError
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.testing import HashEmbedder
from tests.adapters.http.harness import Api, running_api
from tests.conftest import run
from tests.test_expand import QUERY, guide


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    folder = tmp_path_factory.mktemp("expand") / "kb"
    with running_api(folder, HashEmbedder()) as running:  # type: ignore[arg-type]
        assert not running.kb.ingest_documents([guide()]).failed
        running.key("reader", "default", "read")
        yield running


def headers(api: Api) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.tokens['reader']}"}


def python_results(kb: KnowledgeBase, mode: str | None) -> list[dict[str, Any]]:
    answer = kb.search(QUERY, top_n=5, expand=mode)  # type: ignore[arg-type]
    return [
        {"chunk_id": r.chunk_id, "context": r.context and r.context.model_dump(exclude_none=True)}
        for r in answer.results
    ]


def served(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"chunk_id": r["chunk_id"], "context": r.get("context")} for r in results]


def test_http_search_expands_as_python_does(api: Api) -> None:
    for mode in ("none", "section", "neighbours"):
        body = {"query": QUERY, "top_n": 5, "expand": mode}
        response = api.client.post("/v1/search", json=body, headers=headers(api))
        assert response.status_code == 200, response.text
        assert served(response.json()["results"]) == python_results(api.kb, mode), mode
        link = api.client.get(
            "/v1/search", params={"query": QUERY, "top_n": 5, "expand": mode}, headers=headers(api)
        )
        assert served(link.json()["results"]) == python_results(api.kb, mode), mode
    plain = api.client.post("/v1/search", json={"query": QUERY, "top_n": 5}, headers=headers(api))
    assert all("context" not in r for r in plain.json()["results"])


def test_http_refuses_a_bad_expand_with_422(api: Api) -> None:
    for response in (
        api.client.post("/v1/search", json={"query": QUERY, "expand": "all"}, headers=headers(api)),
        api.client.get(
            "/v1/search", params={"query": QUERY, "expand": "all"}, headers=headers(api)
        ),
    ):
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_expand"
        assert error["message"] == "expand must be one of none, section, neighbours, not 'all'"


def test_the_client_expands_as_python_does(api: Api) -> None:
    with Client(str(api.client.base_url), api.tokens["reader"]) as client:
        for mode in ("section", "neighbours"):
            found = client.search(QUERY, top_n=5, expand=mode)  # type: ignore[arg-type]
            mine = [
                {
                    "chunk_id": r.chunk_id,
                    "context": r.context and r.context.model_dump(exclude_none=True),
                }
                for r in found.results
            ]
            assert mine == python_results(api.kb, mode), mode
            assert [r.chunk_id for r in client.query(QUERY, top_n=5, expand=mode)] == [  # type: ignore[arg-type]
                r.chunk_id for r in found.results
            ]
        assert all(r.context is None for r in client.query(QUERY, top_n=5))
        with pytest.raises(QueryError, match="expand must be one of"):
            client.search(QUERY, expand="all")  # type: ignore[arg-type]


GUIDE_MD = """\
# Harbour guide

## Opening hours

The office hours follow.

### Summer

In summer the office opens at dawn and closes at nine in the evening. Boats may
moor at the visitors' pontoon from seven.

## Safety

Lifebuoys and ladders are placed every 30 metres along both quays. Children on the
pontoons wear lifejackets. Swimming in the harbour is forbidden.
"""


def test_the_cli_expands_as_python_does(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    kb_dir = tmp_path / "kb"
    (tmp_path / "guide.md").write_text(GUIDE_MD, encoding="utf-8")
    assert run("init", str(kb_dir)).returncode == 0
    assert run("ingest", "--kb", str(kb_dir), str(tmp_path / "guide.md")).returncode == 0
    question = "office hours follow"
    outputs = {}
    for mode in ("none", "neighbours", "section"):
        done = run("query", "--kb", str(kb_dir), "--json", "--expand", mode, question)
        assert done.returncode == 0, done.stderr
        outputs[mode] = json.loads(done.stdout)
    plain = run("query", "--kb", str(kb_dir), "--json", question)
    assert json.loads(plain.stdout) == outputs["none"]
    top = outputs["neighbours"]["results"][0]
    assert "opens at dawn" in top["context"]["text"]
    # the hit is cited on its own line; the expanded range on all of its lines
    assert top["cite"] == "guide.md:5" and top["context"]["cite"] == "guide.md:5-10"
    panels = run("query", "--kb", str(kb_dir), "--expand", "section", question)
    assert panels.returncode == 0 and "expanded:" in panels.stdout
    facts = run("query", "--kb", str(kb_dir), "--markdown", "--expand", "neighbours", question)
    assert "expanded: neighbours" in facts.stdout and "opens at dawn" in facts.stdout
    with KnowledgeBase.open(kb_dir, embedder=embedder) as kb:
        for mode, said in outputs.items():
            answer = kb.search(question, expand=mode)  # type: ignore[arg-type]
            assert json.loads(kb.format_answer(answer, "json")) == said, mode
    bad = run("query", "--kb", str(kb_dir), "--expand", "all", question)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "expand must be one of none, section, neighbours, not 'all'" in bad.stderr
