"""``llm``: an LLM scores each candidate 0–10 for how well it answers the query."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.kinds import Reranker
from flexmatch.engine.chains.output import parse_json
from flexmatch.engine.chains.reranker._scoring import candidate_text, rescored
from flexmatch.models import SearchResult


class LLMRerankParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_candidates: int = Field(20, ge=1, le=100)
    max_chars: int = Field(800, ge=50)


class LLMRerank(Reranker):
    """An LLM scores each candidate 0–10 for how well it answers the query."""

    Params = LLMRerankParams
    uses_llm = True
    prompt_variables = frozenset({"query", "candidates", "params"})

    async def run(self, query: str, candidates: list[SearchResult]) -> list[SearchResult]:
        head = candidates[: self.params.max_candidates]
        shown = [
            {"index": i, "text": " ".join(candidate_text(c, self.params.max_chars).split())}
            for i, c in enumerate(head)
        ]
        raw = await self.complete(self.render(query=query, candidates=shown))
        data = parse_json(raw)
        items = data.get("scores") if isinstance(data, dict) else data
        scores: dict[int, float] = {}
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            index, score = item.get("index"), item.get("score")
            if isinstance(index, int) and 0 <= index < len(head) and isinstance(score, int | float):
                scores[index] = max(0.0, min(10.0, float(score))) / 10.0
        if not scores:  # unusable output: keep the first-stage order rather than guess
            if head:
                self.warn("the LLM's scores could not be parsed; kept the first-stage order")
            return candidates
        return rescored(head, scores) + candidates[len(head) :]
