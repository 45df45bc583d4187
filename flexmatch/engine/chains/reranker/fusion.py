"""``fusion``: no model, no network; re-score candidates on every signal at once."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.kinds import Reranker
from flexmatch.engine.fusion import minmax
from flexmatch.models import SearchResult


class FusionParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question_weight: float = Field(0.4, ge=0)
    content_weight: float = Field(0.3, ge=0)
    lexical_weight: float = Field(0.3, ge=0)


class FusionRerank(Reranker):
    """No model, no network: re-score candidates on every signal at once.

    The first stage sees each chunk through whichever list found it; here every
    candidate has its best question/sentence match, its content match and its BM25
    score, each min-max normalised over the candidates, and a weighted sum decides.
    """

    Params = FusionParams
    reads_content = False

    async def run(self, query: str, candidates: list[SearchResult]) -> list[SearchResult]:
        if not candidates:
            return candidates
        p = self.params
        signals = {
            "question": (p.question_weight, [c.signals.question for c in candidates]),
            "content": (p.content_weight, [c.signals.content for c in candidates]),
            "lexical": (p.lexical_weight, [c.signals.lexical for c in candidates]),
        }
        totals = [0.0] * len(candidates)
        for weight, values in signals.values():
            if weight == 0:
                continue
            present = {str(i): value for i, value in enumerate(values) if value is not None}
            for key, scaled in minmax(present).items():
                totals[int(key)] += weight * scaled
        order = sorted(range(len(candidates)), key=lambda i: (-totals[i], i))
        return [
            candidates[i].model_copy(
                update={
                    "score": totals[i],
                    "signals": candidates[i].signals.model_copy(update={"rerank": totals[i]}),
                }
            )
            for i in order
        ]
