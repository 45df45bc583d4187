"""The tools defined once: the query rule, the argument models and the schemas they give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flexmatch import (
    MAX_QUERY_CHARS,
    MAX_TOP_N,
    TOOL_ARGUMENTS,
    AddRecordArguments,
    ConfigError,
    IngestUrlArguments,
    KnowledgeBase,
    ListDocumentsArguments,
    QueryError,
    SearchArguments,
    ToolCallError,
    check_query,
    tool_schema,
)
from flexmatch.config import MCP_TOOLS
from flexmatch.testing import HashEmbedder
from tests.conftest import write_config


def test_the_query_rule() -> None:
    assert check_query("Where is the key?") == "Where is the key?"
    assert check_query("x" * 10_000) == "x" * 10_000  # no limit unless one is given
    with pytest.raises(QueryError, match=r"^the query is empty$") as empty:
        check_query(" \n\t")
    assert empty.value.code == "empty_query" and isinstance(empty.value, ConfigError)
    with pytest.raises(QueryError) as long:
        check_query("x" * 41, limit=40, what="text")
    assert long.value.code == "text_too_long"
    assert str(long.value) == "the text is 41 characters, over the 40-character limit"
    assert check_query("x" * 40, limit=40) == "x" * 40


def test_the_knowledge_base_keeps_the_query_rule(tmp_path: Path) -> None:
    write_config(tmp_path / "kb", "sources:\n  default: {}\n")
    with KnowledgeBase.open(tmp_path / "kb", embedder=HashEmbedder(), env={}) as kb:
        with pytest.raises(QueryError) as search:
            kb.search("   ")
        assert search.value.code == "empty_query"
        with pytest.raises(QueryError, match="the text is empty"):
            kb.similar("")
        assert kb.search("x" * (MAX_QUERY_CHARS + 1)).results == []  # the tools' limit only


def test_one_model_per_tool_and_every_tool_is_the_configs() -> None:
    assert tuple(TOOL_ARGUMENTS) == MCP_TOOLS
    assert all(model.tool_name == name for name, model in TOOL_ARGUMENTS.items())


def _walk(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value, *(d for v in value.values() for d in _walk(v))]
    if isinstance(value, list):
        return [d for v in value for d in _walk(v)]
    return []


@pytest.mark.parametrize("name", list(TOOL_ARGUMENTS))
def test_openai_tools_are_plain_json_schema(name: str) -> None:
    model = TOOL_ARGUMENTS[name]
    tool = model.openai_tool()
    assert tool["type"] == "function"
    function = tool["function"]
    assert function["name"] == name and function["description"] == model.tool_description
    parameters = function["parameters"]
    assert parameters["type"] == "object" and parameters["additionalProperties"] is False
    assert list(parameters["properties"]) == list(model.model_fields)
    assert set(parameters["required"]) <= set(parameters["properties"])
    for part in _walk(parameters):
        assert "title" not in part and "default" not in part and part.get("type") != "null"
        assert "anyOf" not in part
    assert all(p["description"] for p in parameters["properties"].values())
    json.dumps(tool)


def test_the_limits_are_in_the_schema() -> None:
    properties = SearchArguments.parameters()["properties"]
    assert properties["query"]["maxLength"] == MAX_QUERY_CHARS
    assert properties["top_n"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_TOP_N,
        "description": properties["top_n"]["description"],
    }
    assert SearchArguments.parameters()["required"] == ["query"]
    assert ListDocumentsArguments.parameters()["required"] == []


def test_tool_schema_drops_titles_nulls_and_defaults() -> None:
    raw = {
        "title": "fArguments",
        "type": "object",
        "properties": {
            "a": {"title": "A", "type": "string", "description": "it"},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "c": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
        },
        "required": ["a"],
    }
    assert tool_schema(raw) == {
        "type": "object",
        "properties": {
            "a": {"type": "string", "description": "it"},
            "b": {"type": "integer"},
            "c": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        },
        "required": ["a"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("model", "arguments", "said"),
    [
        (SearchArguments, {}, "'query' must be a non-empty string of at most 2,000 characters"),
        (SearchArguments, {"query": "  "}, "'query' must be a non-empty string"),
        (SearchArguments, {"query": "x" * (MAX_QUERY_CHARS + 1)}, "'query' must be a non-empty"),
        (SearchArguments, {"query": 7}, "'query' must be a non-empty string"),
        (
            SearchArguments,
            {"query": "x", "top_n": 0},
            "'top_n' must be a whole number from 1 to 20",
        ),
        (SearchArguments, {"query": "x", "top_n": MAX_TOP_N + 1}, "'top_n' must be a whole number"),
        (
            SearchArguments,
            {"query": "x", "tenant": "b", "top_k": 2},
            "search_knowledge does not take the arguments 'tenant', 'top_k' (it takes: query, "
            "top_n, source, filters, depth, expand); the tenant is set by the server",
        ),
        (IngestUrlArguments, {"url": "file:///etc/passwd"}, "'url' must be an http(s) URL"),
        (IngestUrlArguments, {}, "'url' must be an http(s) URL"),
        (AddRecordArguments, {"record": "text"}, "'record' must be a non-empty JSON object"),
        (AddRecordArguments, {"record": {}}, "'record' must be a non-empty JSON object"),
        (ListDocumentsArguments, {"offset": -1}, "'offset': input should be greater than"),
    ],
)
def test_a_bad_argument_is_one_line_naming_it(
    model: type[SearchArguments], arguments: dict[str, Any], said: str
) -> None:
    with pytest.raises(ToolCallError) as refused:
        model.check(arguments)
    message = str(refused.value)
    assert message.startswith(model.tool_name if "does not take" in said else "invalid arguments")
    assert said in message
    assert "\n" not in message and "pydantic.dev" not in message


def test_good_arguments_and_the_query_limit_is_the_rules() -> None:
    longest = "x" * MAX_QUERY_CHARS
    assert SearchArguments.check({"query": longest}).query == longest
    checked = SearchArguments.check({"query": "Where?", "top_n": MAX_TOP_N, "source": "a"})
    assert (checked.top_n, checked.source, checked.filters) == (MAX_TOP_N, "a", None)
    assert IngestUrlArguments.check({"url": "HTTPS://example.org"}).url == "HTTPS://example.org"
    assert AddRecordArguments.check({"record": {"id": 1}}).record == {"id": 1}


def test_the_signature_is_the_models_fields() -> None:
    signature = SearchArguments.signature()
    assert list(signature.parameters) == list(SearchArguments.model_fields)
    assert signature.parameters["query"].default is signature.empty
    assert signature.parameters["top_n"].default is None


def test_search_returns_the_configured_number_of_passages_within_the_tools_limit() -> None:
    """Without ``top_n`` a search returns what the knowledge base is set up to
    (``query.top_n``), never more than the tool says it returns."""
    assert SearchArguments(query="x").passages(5) == 5
    assert SearchArguments(query="x").passages(30) == MAX_TOP_N
    assert SearchArguments(query="x", top_n=3).passages(30) == 3
