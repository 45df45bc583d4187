"""``cohere``: Cohere's rerank endpoint through the official client."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.kinds import Reranker
from flexmatch.engine.chains.reranker._scoring import candidate_text, rescored
from flexmatch.errors import ChainError
from flexmatch.extras import require
from flexmatch.models import SearchResult


class CohereParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = "rerank-v3.5"
    api_key: str = ""
    base_url: str | None = None
    max_chars: int = Field(4000, ge=100)
    timeout: float = Field(30.0, gt=0)


class CohereReranker(Reranker):
    """Cohere's rerank endpoint through the official client (``base_url`` for proxies)."""

    Params = CohereParams

    async def run(self, query: str, candidates: list[SearchResult]) -> list[SearchResult]:
        if not candidates:
            return candidates
        if not self.params.api_key:
            raise ChainError(f"{self.spec.path}: the cohere reranker needs params.api_key")
        cohere = require("cohere", "cohere", "the cohere reranker")
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
