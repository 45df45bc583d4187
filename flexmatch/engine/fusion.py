"""Fusing ranked lists: reciprocal rank fusion, distribution-based score fusion, and a
weighted sum of min-max normalised scores. Inputs are {id: score} maps, best = highest."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

Scores = dict[str, float]


def ranking(scores: Scores) -> list[str]:
    return sorted(scores, key=lambda key: (-scores[key], key))


def rrf(lists: Sequence[Scores], k: int = 60, weights: Sequence[float] | None = None) -> Scores:
    """Σ weight / (k + rank), rank from 1; rank-based, so score scales never matter."""
    weights = weights or [1.0] * len(lists)
    fused: Scores = {}
    for scores, weight in zip(lists, weights, strict=True):
        for rank, key in enumerate(ranking(scores), start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return fused


def dbsf(lists: Sequence[Scores], weights: Sequence[float] | None = None) -> Scores:
    """Qdrant's distribution-based score fusion: each list scaled by mean ± 3σ, then summed."""
    weights = weights or [1.0] * len(lists)
    fused: Scores = {}
    for scores, weight in zip(lists, weights, strict=True):
        if not scores:
            continue
        values = list(scores.values())
        mean = statistics.fmean(values)
        spread = statistics.pstdev(values) if len(values) > 1 else 0.0
        low, high = mean - 3 * spread, mean + 3 * spread
        for key, value in scores.items():
            scaled = 0.5 if high == low else (value - low) / (high - low)
            fused[key] = fused.get(key, 0.0) + weight * scaled
    return fused


def minmax(scores: Scores) -> Scores:
    """Each score scaled to 0..1 over ``scores`` (all 1.0 when they are equal): the one
    min-max normalisation (first-stage fusion and the ``fusion`` reranker)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return {key: 1.0 for key in scores}
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def weighted(lists: Sequence[Scores], weights: Sequence[float]) -> Scores:
    """Σ weight × min-max normalised score; an id missing from a list scores 0 there."""
    fused: Scores = {}
    for scores, weight in zip(lists, weights, strict=True):
        for key, value in minmax(scores).items():
            fused[key] = fused.get(key, 0.0) + weight * value
    for scores in lists:
        for key in scores:
            fused.setdefault(key, 0.0)
    return fused
