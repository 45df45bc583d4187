"""Tool calls: how the fake model answers a chat that offers tools, as a tool-using model
does (call the search tool with the user's question, then quote what it returned)."""

from __future__ import annotations

import json
from typing import Any

from flexmatch.testing.fake_llm.text import message_text


def _chosen_tool(tools: list[Any]) -> dict[str, Any] | None:
    """The offered function that takes a ``query`` (a search tool), else the first one."""
    functions = [
        t["function"]
        for t in tools
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("name")
    ]
    for function in functions:
        properties = (function.get("parameters") or {}).get("properties") or {}
        if "query" in properties:
            return function
    return functions[0] if functions else None


def _tool_answer(content: str) -> str:
    """Words quoting a tool's result: its first passage and where it came from."""
    try:
        result = json.loads(content)
    except ValueError:
        result = None
    if isinstance(result, dict) and isinstance(result.get("results"), list):
        if not result["results"]:
            return "The knowledge base has nothing on that."
        first = result["results"][0] if isinstance(result["results"][0], dict) else {}
        where = first.get("uri") or first.get("title") or "the knowledge base"
        passage = " ".join(str(first.get("content", "")).split())[:400]
        return f"According to {where}: {passage}"
    if isinstance(result, dict) and result.get("error"):
        return f"The tool failed: {result['error']}"
    return "The tool returned: " + " ".join(content.split())[:400]


def tool_call_message(messages: list[dict], tools: list[Any], call_id: str) -> dict[str, Any]:
    """The assistant message a tool-using model sends: a call of the offered search tool
    while the conversation has no tool result since the user spoke, then an answer."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    results = [m for m in messages[last_user + 1 :] if m.get("role") == "tool"]
    if results:
        return {"role": "assistant", "content": _tool_answer(message_text(results[-1]))}
    function = _chosen_tool(tools)
    if function is None:
        return {"role": "assistant", "content": "OK"}
    properties = (function.get("parameters") or {}).get("properties") or {}
    question = message_text(messages[last_user]) if last_user >= 0 else ""
    arguments = {"query": question} if "query" in properties else {}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": function["name"], "arguments": json.dumps(arguments)},
            }
        ],
    }
