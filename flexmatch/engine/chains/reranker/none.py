"""``none``: keep the first-stage order."""

from __future__ import annotations

from flexmatch.engine.chains.kinds import Reranker
from flexmatch.models import SearchResult


class NoReranker(Reranker):
    """Keep the first-stage order."""

    reads_content = False

    async def run(self, query: str, candidates: list[SearchResult]) -> list[SearchResult]:
        return candidates
