"""``markdown``: a "facts" block rendered from a Jinja template, for a system prompt."""

from __future__ import annotations

from flexmatch.engine.chains.kinds import Formatter
from flexmatch.results import ToolResult


class MarkdownFormatter(Formatter):
    """A "facts" block rendered from a Jinja template, for an agent's system prompt."""

    prompt_variables = frozenset({"query", "results", "warnings", "params"})

    async def run(self, result: ToolResult) -> str:
        items = [item.model_dump() for item in result.results]
        return self.render(query=result.query, results=items, warnings=result.warnings or [])
