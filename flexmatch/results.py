"""The one shape results leave FlexMatch in.

A query's ``Answer`` (what the query path produced) becomes a ``ToolResult``: the JSON
object an agent receives. The ``json`` and ``markdown`` formatter chains render it, and
every interface (Python ``KnowledgeBase.format``, ``flexmatch query --json``, the HTTP
API, the MCP server, the agent tool) goes through it, so they all say the same thing.
"""

from __future__ import annotations

from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, Field

from flexmatch.errors import DepthError
from flexmatch.models import ExpandedContext, Location, SearchResult, Signals, shared_fields

Depth = Literal["fast", "deep"]
"""How hard a search looks: ``fast``, one search; ``deep``, its first results seed more."""
DEPTHS: tuple[str, ...] = get_args(Depth)


def check_depth(depth: object) -> Depth:
    """``depth`` if it is one FlexMatch knows, else a ``DepthError`` naming the choices
    (the one rule every interface keeps)."""
    if depth not in DEPTHS:
        choices = " or ".join(f"'{d}'" for d in DEPTHS)
        raise DepthError(f"depth must be {choices}, not {depth!r}")
    return cast("Depth", depth)


class SearchCost(BaseModel):
    """What a deep search cost: its hops and searches, the LLM calls and tokens its
    follow-up queries took, its time, the follow-up queries, and why it stopped early
    (``stopped``: ``time_budget``, ``max_searches``; absent: it ran its course)."""

    depth: Depth = "deep"
    hops: int = 0
    searches: int = 0
    llm_calls: int = 0
    llm_tokens: int = 0
    took_ms: float = 0.0
    follow_ups: list[str] = Field(default_factory=list)
    stopped: str | None = None


class Answer(BaseModel):
    """What one query produced: the variants searched, the results, and any warnings."""

    query: str
    variants: list[str] = Field(default_factory=list)
    results: list[SearchResult] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    took_ms: float = 0.0
    cost: SearchCost | None = Field(None, description="What a deep search cost (deep only).")
    stage_ms: dict[str, float] = Field(
        default_factory=dict,
        exclude=True,  # a measurement of this process, not part of the answer's JSON
        repr=False,
        description="Milliseconds per stage (transform, embed, search, rerank); BM25 "
        "search runs while the query is embedded, so the stages may add up to more.",
    )


class ResultItem(BaseModel):
    """One result as an agent sees it."""

    rank: int
    source: str
    document_id: str
    chunk_id: str
    chunk_index: int = Field(
        0, description="Its place in the document: read(chunk=...) opens it with neighbours."
    )
    uri: str
    title: str
    heading_path: list[str]
    location: Location | None = Field(
        None, description="Where the chunk is in its document (absent when not known)."
    )
    matched_location: Location | None = Field(
        None,
        description="Where the matched text is, when that is narrower than the chunk (a "
        "sentence of a chunk continued over a page break); ``cite`` names it.",
    )
    cite: str = Field("", description="A short citation: 'handbook.pdf p. 7', 'shutil.py:12-40'.")
    qualifying_text: str
    content: str
    matched_text: str
    score: float
    metadata: dict[str, Any] = Field(default_factory=dict)
    explanation: Signals | None = Field(None, description="Every signal, when asked to explain.")
    context: ExpandedContext | None = Field(
        None, description="Its section or neighbouring chunks, when the search expanded it."
    )


class ToolResult(BaseModel):
    """The tool result: the query, its results best first, and (when explained) the
    rewritten variants that were searched."""

    query: str
    variants: list[str] | None = Field(None, description="The searched variants (explain).")
    warnings: list[str] | None = Field(None, description="What did not go as configured.")
    cost: SearchCost | None = Field(
        None, description="What a deep search cost: hops, searches, LLM calls, time."
    )
    results: list[ResultItem]

    def to_json(self) -> str:
        """The canonical JSON text (the same bytes from every interface)."""
        return self.model_dump_json(indent=2, exclude_none=True)


def tool_result(
    query: str,
    results: list[SearchResult],
    *,
    explain: bool = False,
    variants: list[str] | None = None,
    warnings: list[str] | None = None,
    cost: SearchCost | None = None,
) -> ToolResult:
    """The tool result for ``results``; ``explain`` adds each result's signals."""
    items = [
        ResultItem.model_validate(
            {
                **shared_fields(r, ResultItem),
                "rank": rank,
                "score": round(r.score, 4),
                "explanation": r.signals if explain else None,
            }
        )
        for rank, r in enumerate(results, start=1)
    ]
    return ToolResult(
        query=query,
        variants=list(variants) if explain and variants is not None else None,
        warnings=list(warnings) if warnings else None,
        cost=cost,
        results=items,
    )


def answer_result(answer: Answer, *, explain: bool = False) -> ToolResult:
    """The tool result of a whole answer."""
    return tool_result(
        answer.query,
        answer.results,
        explain=explain,
        variants=answer.variants,
        warnings=answer.warnings,
        cost=answer.cost,
    )
