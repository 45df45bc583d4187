"""One output path: the same query gives the same JSON tool result through the Python API,
``flexmatch query --json``, the MCP server and the HTTP API."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from tests.adapters.http.harness import KB_CONFIG, running_api
from tests.conftest import DOCS, FLEXMATCH, run, write_config

QUESTION = "How many blankets were delivered?"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _mcp_search(kb_dir: Path) -> str:
    params = StdioServerParameters(
        command=str(FLEXMATCH),
        args=["mcp", "--kb", str(kb_dir)],
        env={"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )

    async def call() -> str:
        async with Client(params, read_timeout_seconds=60) as client:
            found = await client.call_tool("search_knowledge", {"query": QUESTION, "top_n": 5})
            assert not found.is_error
            return str(found.content[0].text)  # type: ignore[union-attr]

    return asyncio.run(call())


def test_the_same_query_gives_the_same_json_everywhere(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, KB_CONFIG)
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        kb.ingest([DOCS / "pdf_fake-memo.pdf", DOCS / "handbook-1p.docx", DOCS / "fake.docx"])

    cli = run("query", "--kb", str(kb_dir), "--json", QUESTION)
    assert cli.returncode == 0, cli.stderr
    mcp = _mcp_search(kb_dir)
    with running_api(kb_dir, embedder) as api:
        answer = api.kb.search(QUESTION)
        python = api.kb.format(QUESTION, answer.results, "json")
        explained = api.kb.format(
            QUESTION, answer.results, "json", explain=True, variants=answer.variants
        )
        headers = {"Authorization": f"Bearer {api.key('reader', 'default', 'read')}"}
        http = api.client.post("/v1/search", json={"query": QUESTION}, headers=headers)
        http_explained = api.client.post(
            "/v1/search", json={"query": QUESTION, "explain": True}, headers=headers
        )
        http_get = api.client.get("/v1/search", params={"query": QUESTION}, headers=headers)

    data = json.loads(python)
    assert data["query"] == QUESTION and len(data["results"]) >= 3
    assert "10,000 blankets" in data["results"][0]["content"]
    assert "explanation" not in data["results"][0] and "variants" not in data
    # byte for byte: the Python API, the CLI and the MCP tool print the same text
    assert cli.stdout == python + "\n"
    assert mcp == python
    # HTTP wraps the same tool result in a response with request facts
    for response in (http, http_get):
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["query"] == QUESTION and body["total"] == len(data["results"])
        assert body["took_ms"] >= 0
        assert _canonical(body["results"]) == _canonical(data["results"])
    # and ``explain`` works over HTTP: the same signals and variants as the Python API
    assert http_explained.status_code == 200, http_explained.text
    body, expected = http_explained.json(), json.loads(explained)
    assert body["explain"] is True and body["variants"] == expected["variants"] == [QUESTION]
    assert _canonical(body["results"]) == _canonical(expected["results"])
    assert {"dense", "lexical", "rerank"} <= set(body["results"][0]["explanation"])
