from __future__ import annotations

import math
from pathlib import Path

import pytest

from flexmatch.errors import ConfigError
from flexmatch.evaluation import BeirDataset, mrr_at_k, ndcg_at_k, recall_at_k


def test_ndcg_binary_by_hand() -> None:
    # relevant at ranks 2 and 4 of two relevant documents
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["x", "a", "y", "b"], {"a": 1, "b": 1}) == pytest.approx(expected)
    assert ndcg_at_k(["a", "b"], {"a": 1, "b": 1}) == pytest.approx(1.0)
    assert ndcg_at_k(["x"], {"a": 1}) == 0.0


def test_ndcg_honours_graded_relevance() -> None:
    relevant = {"a": 2, "b": 1}
    assert ndcg_at_k(["a", "b"], relevant) == pytest.approx(1.0)
    swapped = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert ndcg_at_k(["b", "a"], relevant) == pytest.approx(swapped)


def test_recall_and_mrr_by_hand() -> None:
    relevant = {"a": 1, "b": 1, "c": 0}
    assert recall_at_k(["x", "a", "c", "y", "z", "b"], relevant, 5) == 0.5
    assert recall_at_k(["x", "a", "c", "y", "z", "b"], relevant, 10) == 1.0
    assert mrr_at_k(["x", "c", "b"], relevant) == pytest.approx(1 / 3)
    assert mrr_at_k(["x"] * 12 + ["a"], relevant) == 0.0


def test_beir_loading_and_errors(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "x?"}\n{"_id": "q2", "text": "y?"}\n'
    )
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\n")
    data = BeirDataset.load(tmp_path)
    assert data.queries == {"q1": "x?"} and data.qrels == {"q1": {"d1": 2}}
    (tmp_path / "qrels" / "test.tsv").unlink()
    with pytest.raises(ConfigError, match=r"test\.tsv is missing"):
        BeirDataset.load(tmp_path)
