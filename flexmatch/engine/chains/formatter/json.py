"""``json``: the tool result as JSON (the same bytes every interface returns)."""

from __future__ import annotations

from flexmatch.engine.chains.kinds import Formatter
from flexmatch.results import ToolResult


class JsonFormatter(Formatter):
    """A JSON tool result."""

    async def run(self, result: ToolResult) -> str:
        return result.to_json()
