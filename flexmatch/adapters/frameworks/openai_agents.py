"""The OpenAI Agents SDK: the knowledge base as a ``function_tool``.

::

    agent = Agent(name="helper", tools=[search_tool(KnowledgeBase.open("my-kb"), principal=alice)])

The tool takes a ``query`` (and optionally ``top_n``, a ``source``, ``depth`` and
``expand``, as the MCP tool does) and returns the tool result every FlexMatch interface
returns, as JSON: per result the chunk and document ids, source, uri, title, heading
path, location, citation, score, matched text and content (and its context, expanded).
A mistake (an empty query, an unknown source) comes back as ``{"error": ...}`` so the
model can try again. ``kb`` may be a ``Client`` of a served knowledge base.
"""

from __future__ import annotations

import json
from typing import Any

from flexmatch import (
    FlexMatchError,
    Scope,
    SearchArguments,
    ToolCallError,
    tool_result,
)
from flexmatch.service import require_extra

require_extra("agents", "openai-agents", "The OpenAI Agents SDK tool")

from agents import FunctionTool, function_tool  # noqa: E402

from flexmatch.adapters.frameworks.common import (  # noqa: E402
    TOOL_DESCRIPTION,
    TOOL_NAME,
    Searchable,
    asearch,
    check_scope,
)


def search_tool(
    kb: Searchable,
    *,
    name: str = TOOL_NAME,
    description: str = TOOL_DESCRIPTION,
    top_n: int = 5,
    filters: dict[str, Any] | None = None,
    tenant: str | None = None,
    principal: Scope | None = None,
) -> FunctionTool:
    """A function tool that searches ``kb``; ``filters`` always apply (the model's
    ``source`` narrows them further), ``top_n`` is the default number of passages.
    ``principal``: the person the agent serves, or ``flexmatch.ADMIN`` for everything;
    over a local knowledge base with restricted documents a tool without one answers
    each call with an error rather than reading them all (and is refused when made)."""
    check_scope(kb, tenant, principal)

    async def search_knowledge(
        query: str,
        top_n: int = top_n,
        source: str | None = None,
        depth: str = "fast",  # plain strings: a wrong one gets this tool's own clear error
        expand: str | None = None,
    ) -> str:
        """Search the knowledge base.

        Args:
            query: What to look for, ideally as a full question.
            top_n: How many passages to return (1 to 20).
            source: Only search this data source (optional).
            depth: 'fast' (default): one search. 'deep': the first passages seed follow-up
                searches, for questions whose answer spans passages the question does not
                name (slower).
            expand: 'section' or 'neighbours': a short passage comes with its section or
                the passages either side; 'none' (or left out): as the knowledge base is
                set up.
        """
        asked = {"query": query, "top_n": top_n, "source": source, "depth": depth}
        try:  # the rules the agent tool and the MCP server check, in the same words
            SearchArguments.check({**asked, "expand": expand})
        except ToolCallError as exc:
            return json.dumps({"error": str(exc)})
        chosen = {**(filters or {}), **({"source": source} if source else {})} or None
        try:
            results = await asearch(
                kb,
                query,
                top_n=top_n,
                filters=chosen,
                tenant=tenant,
                principal=principal,
                depth=depth,
                expand=expand,
            )
        except FlexMatchError as exc:
            return json.dumps({"error": str(exc)})
        return tool_result(query, results).to_json()

    return function_tool(search_knowledge, name_override=name, description_override=description)
