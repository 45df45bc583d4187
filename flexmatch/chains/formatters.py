"""Result formatters: top results → what the agent sees."""

from __future__ import annotations

import json
from typing import Any

from flexmatch.chains.base import Chain, register
from flexmatch.errors import ConfigError
from flexmatch.models import SearchResult


class ResultFormatter(Chain):
    def run(self, query: str, results: list[SearchResult]) -> str:
        raise NotImplementedError


def tool_result(query: str, results: list[SearchResult]) -> dict[str, Any]:
    """The JSON tool-result object an agent receives."""
    return {
        "query": query,
        "results": [
            {
                "rank": rank,
                "source": r.source,
                "document_id": r.document_id,
                "uri": r.uri,
                "title": r.title,
                "heading_path": r.heading_path,
                "qualifying_text": r.qualifying_text,
                "content": r.content,
                "matched_text": r.matched_text,
                "score": round(r.score, 4),
            }
            for rank, r in enumerate(results, start=1)
        ],
    }


@register("result_formatter", "json")
class JsonFormatter(ResultFormatter):
    """A JSON tool result."""

    def run(self, query: str, results: list[SearchResult]) -> str:
        return json.dumps(tool_result(query, results), ensure_ascii=False, indent=2)


@register("result_formatter", "markdown")
class MarkdownFormatter(ResultFormatter):
    """A "facts" block rendered from a Jinja template, for an agent's system prompt."""

    prompt_variables = frozenset({"query", "results", "params"})

    def run(self, query: str, results: list[SearchResult]) -> str:
        if self.prompt is None:
            raise ConfigError(f"{self.spec.path}: field 'prompt': a markdown formatter needs one")
        return self.render(query=query, results=tool_result(query, results)["results"])
