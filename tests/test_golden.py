"""Golden sets: the file format and its one-line errors, how a result answers a document
or a citation, the scores, and the signals the ablation switches off."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from flexmatch import ConfigError, GoldenQuestion, KBConfig, load_golden, save_golden
from flexmatch.config import ChainRef
from flexmatch.golden import GoldenOutcome, cites, rank_of, scores_of, switches
from flexmatch.models import SearchResult


def result(document_id: str, uri: str, chunk: int = 0, page: int | None = None) -> SearchResult:
    location = {"page": page} if page is not None else None
    return SearchResult.model_validate(
        {
            "chunk_id": f"{document_id}#{chunk}",
            "document_id": document_id,
            "uri": uri,
            "source": "default",
            "title": "",
            "heading_path": [],
            "content": "text",
            "qualifying_text": "",
            "matched_text": "text",
            "score": 1.0,
            "location": location,
        }
    )


def test_a_golden_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "golden.yaml"
    path.write_text(
        "- question: How long does a refund take?\n"
        "  expect: {document: refunds.md}\n"
        "  must_not: [old-refunds.md]\n"
        "- question: Where are the fees?\n"
        "  expect: {citation: handbook.pdf p. 7}\n"
        "  optional: true\n"
    )
    items = load_golden(path)
    assert [i.expect.document for i in items] == ["refunds.md", None]
    assert items[1].expect.citation == "handbook.pdf p. 7" and items[1].optional
    assert load_golden(save_golden(items, tmp_path / "again.yaml")) == items


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("- question: Q\n", "item 1 ('Q'): field 'expect': Field required"),
        (
            "- question: Q\n  expect: {document: a.md, citation: a.md p. 1}\n",
            "item 1 ('Q'): field 'expect': Value error, give either document or citation",
        ),
        (
            "- {question: A, expect: {document: a.md}}\n- question: B\n  expect: {page: 3}\n",
            "item 2 ('B'): field 'expect.page': unknown field",
        ),
        ("- question: '  '\n  expect: {document: a.md}\n", "item 1 ('  '): field 'question'"),
        ("- {question: Q, expect: {document: a}, must_not: a.md}\n", "field 'must_not'"),
        ("question: Q\n", "expected a list of golden questions"),
        ("- [unclosed\n", "not valid YAML"),
    ],
)
def test_a_bad_golden_file_is_one_line_naming_the_item_and_field(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "golden.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_golden(path)
    message = str(caught.value)
    assert said in message and str(path) in message
    assert "\n" not in message.strip() or "not valid YAML" in said


@pytest.mark.parametrize(
    ("cite", "citation", "answers"),
    [
        ("tax.md:3", "tax.md", True),  # narrower: a line of the document
        ("tax.md:3", "tax.md:3", True),
        ("taxes.md:3", "tax.md", False),
        ("handbook.pdf pp. 6-8", "handbook.pdf p. 7", True),  # overlapping pages
        ("handbook.pdf p. 9", "handbook.pdf p. 7", False),
        ("guide.md:10-20", "guide.md:12", True),
        ("guide.md:10-20", "guide.md:21", False),
        ("mail.eml › report.pdf p. 2", "mail.eml", True),
        ("deck.pptx slides 2-4", "deck.pptx slide 3", True),
        ("other.pdf p. 7", "handbook.pdf p. 7", False),
        ("handbook.pdf  p. 7", "handbook.pdf p. 7", True),  # blanks aside
    ],
)
def test_which_citations_answer_a_golden_citation(cite: str, citation: str, answers: bool) -> None:
    assert cites(cite, citation) is answers


def test_rank_counts_documents_not_chunks() -> None:
    results = [
        result("a1", "/docs/a.md", 0),
        result("a1", "/docs/a.md", 1),
        result("b2", "/docs/b.pdf", 0, page=4),
        result("c3", "upload:c.txt"),
    ]
    expect = GoldenQuestion.model_validate({"question": "q", "expect": {"document": "c.txt"}})
    assert rank_of(results, expect.expect) == 3  # a.md, b.pdf, c.txt: third document
    by_id = GoldenQuestion.model_validate({"question": "q", "expect": {"document": "b2"}})
    assert rank_of(results, by_id.expect) == 2
    by_uri = GoldenQuestion.model_validate({"question": "q", "expect": {"document": "/docs/a.md"}})
    assert rank_of(results, by_uri.expect) == 1
    cited = GoldenQuestion.model_validate({"question": "q", "expect": {"citation": "b.pdf p. 4"}})
    assert rank_of(results, cited.expect) == 2
    absent = GoldenQuestion.model_validate({"question": "q", "expect": {"document": "d.md"}})
    assert rank_of(results, absent.expect) is None


def test_scores_by_hand() -> None:
    expect = {"document": "a"}

    def outcome(rank: int | None, passed: bool, optional: bool = False) -> GoldenOutcome:
        return GoldenOutcome.model_validate(
            {
                "question": "q",
                "expect": expect,
                "rank": rank,
                "first": None,
                "passed": passed,
                "optional": optional,
            }
        )

    got = scores_of([outcome(1, True), outcome(3, False), outcome(None, False, optional=True)])
    assert (got.questions, got.passed, got.failed) == (3, 1, 1)  # the optional one warns
    assert got.hit_at_1 == round(1 / 3, 4) and got.hit_at_5 == round(2 / 3, 4)
    assert got.mrr_at_10 == round((1 + 1 / 3) / 3, 4)
    assert got.ndcg_at_10 == round((1 + 1 / math.log2(4)) / 3, 4)


def test_the_ablation_switches_each_signal_at_query_time() -> None:
    config = KBConfig()
    found = {s.signal: s for s in switches(config)}
    assert list(found) == [
        "questions",
        "sentences",
        "chunk text",
        "learned",
        "BM25",
        "context",
        "reranker",
    ]
    assert "question" not in found["questions"].filters["match_kind"]
    assert "content" not in found["chunk text"].filters["match_kind"]
    assert set(found["sentences"].filters["match_kind"]) == {
        "question",
        "keyword",
        "content",
        "title",
        "learned",
    }
    bm25 = found["BM25"].query
    assert bm25 is not None and bm25.retrieval == "dense"
    assert bm25.reranker == ChainRef(chain="fusion-rerank", params={"lexical_weight": 0})
    assert found["context"].note and found["context"].query is None
    reranker = found["reranker"]
    assert reranker.query is not None and reranker.query.reranker.chain == "none"
    lexical = KBConfig.model_validate({"query": {"retrieval": "lexical"}})
    assert {s.signal: s for s in switches(lexical)}["BM25"].note
