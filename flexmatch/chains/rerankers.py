"""Rerankers: query + candidate chunks → the candidates re-scored, best first."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.chains.base import Chain, register
from flexmatch.chains.output import parse_json
from flexmatch.errors import ChainError
from flexmatch.models import SearchResult


class Reranker(Chain):
    async def run(self, query: str, candidates: list[SearchResult]) -> list[SearchResult]:
        raise NotImplementedError


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


@register("reranker", "none")
class NoReranker(Reranker):
    """Keep the first-stage order."""

    async def run(self, query: str, candidates: list[SearchResult]) -> list[SearchResult]:
        return candidates


class CohereParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = "rerank-v3.5"
    api_key: str = ""
    base_url: str | None = None
    max_chars: int = Field(4000, ge=100)
    timeout: float = Field(30.0, gt=0)


@register("reranker", "cohere")
class CohereReranker(Reranker):
    """Cohere's rerank endpoint through the official client (``base_url`` for proxies)."""

    Params = CohereParams

    async def run(self, query: str, candidates: list[SearchResult]) -> list[SearchResult]:
        if not candidates:
            return candidates
        if not self.params.api_key:
            raise ChainError(f"{self.spec.path}: the cohere reranker needs params.api_key")
        import cohere

        client = cohere.ClientV2(
            api_key=self.params.api_key,
            base_url=self.params.base_url,
            timeout=self.params.timeout,
        )
        documents = [candidate_text(c, self.params.max_chars) for c in candidates]
        try:
            response = await asyncio.to_thread(
                client.rerank,
                model=self.params.model,
                query=query,
                documents=documents,
                top_n=len(documents),
            )
        except Exception as exc:
            raise ChainError(f"cohere rerank failed: {type(exc).__name__}: {exc}") from exc
        scores = {
            r.index: float(r.relevance_score)
            for r in response.results
            if 0 <= r.index < len(candidates)
        }
        return rescored(candidates, scores)


class LLMRerankParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_candidates: int = Field(20, ge=1, le=100)
    max_chars: int = Field(800, ge=50)


@register("reranker", "llm")
class LLMReranker(Reranker):
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
            return candidates
        return rescored(head, scores) + candidates[len(head) :]


class FusionParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question_weight: float = Field(0.4, ge=0)
    content_weight: float = Field(0.3, ge=0)
    lexical_weight: float = Field(0.3, ge=0)


@register("reranker", "fusion")
class SignalFusion(Reranker):
    """No model, no network: re-score candidates on every signal at once.

    The first stage sees each chunk through whichever list found it; here every
    candidate has its best question/sentence match, its content match and its BM25
    score, each min-max normalised over the candidates, and a weighted sum decides.
    """

    Params = FusionParams

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
            present = [v for v in values if v is not None]
            if not present or weight == 0:
                continue
            low, high = min(present), max(present)
            for i, value in enumerate(values):
                if value is not None and high > low:
                    totals[i] += weight * (value - low) / (high - low)
                elif value is not None:
                    totals[i] += weight
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
