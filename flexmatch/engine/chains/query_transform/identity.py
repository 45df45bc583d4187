"""``identity``: the query as typed."""

from __future__ import annotations

from flexmatch.engine.chains.kinds import QueryTransform


class Identity(QueryTransform):
    """The query as typed."""

    async def run(self, query: str) -> list[str]:
        return [query]
