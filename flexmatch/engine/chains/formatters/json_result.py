"""``json``: the tool result as JSON (the same bytes every interface returns)."""

from __future__ import annotations

from flexmatch.engine.chains.kinds import ResultFormatter
from flexmatch.engine.chains.registry import register
from flexmatch.results import ToolResult


@register("result_formatter", "json")
class JsonFormatter(ResultFormatter):
    """A JSON tool result."""

    async def run(self, result: ToolResult) -> str:
        return result.to_json()
