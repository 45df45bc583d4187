from __future__ import annotations

import pytest

from flexmatch.engine.fusion import dbsf, minmax, ranking, rrf, weighted


def test_rrf_by_hand() -> None:
    dense = {"a": 0.9, "b": 0.8, "c": 0.1}
    lexical = {"c": 12.0, "a": 3.0}
    fused = rrf([dense, lexical], k=60)
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)
    assert ranking(fused) == ["a", "c", "b"]
    weighted_rrf = rrf([dense, lexical], k=60, weights=[0.7, 0.3])
    assert weighted_rrf["b"] == pytest.approx(0.7 / 62)


def test_dbsf_scales_by_mean_and_three_sigma() -> None:
    fused = dbsf([{"a": 1.0, "b": 0.0}])
    # mean 0.5, sigma 0.5: range [-1, 2]
    assert fused == {"a": pytest.approx(2 / 3), "b": pytest.approx(1 / 3)}
    assert dbsf([{"only": 5.0}]) == {"only": 0.5}


def test_weighted_sum_of_minmax() -> None:
    fused = weighted([{"a": 0.9, "b": 0.5}, {"b": 10.0, "c": 2.0}], [0.7, 0.3])
    assert fused == {"a": pytest.approx(0.7), "b": pytest.approx(0.3), "c": pytest.approx(0.0)}
    assert minmax({"x": 3.0, "y": 3.0}) == {"x": 1.0, "y": 1.0}
