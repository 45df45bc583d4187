"""What the rerankers share: the text a candidate is judged by, and re-scoring."""

from __future__ import annotations

from flexmatch.models import SearchResult


def candidate_text(result: SearchResult, max_chars: int) -> str:
    heading = " › ".join([result.title, *result.heading_path]).strip(" ›")
    text = f"{heading}\n{result.content}" if heading else result.content
    return text[:max_chars]


def rescored(candidates: list[SearchResult], scores: dict[int, float]) -> list[SearchResult]:
    """Candidates with new scores, best first; unscored ones keep their order, last."""
    ranked = sorted(range(len(candidates)), key=lambda i: (i not in scores, -scores.get(i, 0.0), i))
    return [
        candidates[i].model_copy(update={"score": scores[i]}) if i in scores else candidates[i]
        for i in ranked
    ]
