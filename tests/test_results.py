"""The one output shape: a query's results as the tool result every interface returns."""

from __future__ import annotations

import json

from flexmatch.models import Location, SearchResult, Signals
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
        "chunk_index",
        "uri",
        "title",
        "heading_path",
        "cite",
        "qualifying_text",
        "content",
        "matched_text",
        "score",
        "metadata",
    ]
    assert [r["rank"] for r in data["results"]] == [1, 2]
    assert first["score"] == 0.3333 and first["content"].endswith("ünïcode")
    assert first["cite"] == "0.md"  # no location known (a chunk stored before they were kept)


def test_location_and_cite_say_where_a_result_is() -> None:
    cases = [
        ("/docs/handbook.pdf", Location(page=7), "handbook.pdf p. 7"),
        ("/docs/handbook.pdf", Location(page=7, page_end=9), "handbook.pdf pp. 7-9"),
        ("/lib/shutil.py", Location(line_start=512, line_end=560), "shutil.py:512-560"),
        ("/lib/shutil.py", Location(line_start=12, line_end=12), "shutil.py:12"),
        (
            "/x/sales.xlsx",
            Location(sheet="Q3", row_start=2, row_end=40),
            "sales.xlsx › Q3 rows 2-40",
        ),
        ("/x/deck.pptx", Location(slide=3), "deck.pptx slide 3"),
        ("https://h.org/guide.html?v=2", Location(fragment="install"), "guide.html#install"),
        ("/m/mail.eml", Location(attachment="report.pdf", page=2), "mail.eml › report.pdf p. 2"),
        ("/man/man8/fsck.8.gz", Location(section="EXIT CODES"), "fsck(8) › EXIT CODES"),
        ("/man/man3/printf.3posix", Location(section="NAME"), "printf(3posix) › NAME"),
        ("/d/guide.html", Location(section="Install › Linux"), "guide.html › Install › Linux"),
        ("/d/guide.html", Location(fragment="use", section="Tips"), "guide.html#use › Tips"),
        ("/d/notes.1", Location(line_start=3, line_end=5), "notes.1:3-5"),
    ]
    for uri, location, cite in cases:
        result = _result(0).model_copy(update={"uri": uri, "location": location})
        item = json.loads(tool_result("q", [result]).to_json())["results"][0]
        assert item["cite"] == cite
        assert item["location"] == location.model_dump(exclude_none=True)


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
