"""The one output shape: a query's results as the tool result every interface returns."""

from __future__ import annotations

import json

from flexmatch.models import SearchResult, Signals
from flexmatch.results import Answer, answer_result, tool_result


def _result(i: int) -> SearchResult:
    return SearchResult(
        chunk_id=f"d{i}#0",
        document_id=f"d{i}",
        uri=f"/x/{i}.md",
        source="default",
        title=f"Title {i}",
        heading_path=["H"],
        content=f"content {i} — ünïcode",
        qualifying_text="ctx",
        matched_text=f"Q{i}?",
        score=1 / 3 + i,
        metadata={"tags": ["a"]},
        signals=Signals(dense=0.9, lexical=3.2, rerank=0.5),
    )


def test_tool_result_ranks_rounds_and_keeps_fields_in_order() -> None:
    data = json.loads(tool_result("q", [_result(0), _result(1)]).to_json())
    assert list(data) == ["query", "results"]
    first = data["results"][0]
    assert list(first) == [
        "rank",
        "source",
        "document_id",
        "chunk_id",
        "uri",
        "title",
        "heading_path",
        "qualifying_text",
        "content",
        "matched_text",
        "score",
        "metadata",
    ]
    assert [r["rank"] for r in data["results"]] == [1, 2]
    assert first["score"] == 0.3333 and first["content"].endswith("ünïcode")


def test_explain_adds_signals_and_variants() -> None:
    answer = Answer(query="q", variants=["q", "What is q?"], results=[_result(0)])
    plain = json.loads(answer_result(answer).to_json())
    assert "variants" not in plain and "explanation" not in plain["results"][0]
    explained = json.loads(answer_result(answer, explain=True).to_json())
    assert explained["variants"] == ["q", "What is q?"]
    assert explained["results"][0]["explanation"] == {"dense": 0.9, "lexical": 3.2, "rerank": 0.5}


def test_warnings_are_carried_when_there_are_some() -> None:
    answer = Answer(query="q", warnings=["the rewrite fell back"], results=[])
    assert json.loads(answer_result(answer).to_json())["warnings"] == ["the rewrite fell back"]
