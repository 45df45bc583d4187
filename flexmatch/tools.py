"""The knowledge base's tools for agents, defined once: what a valid query is, and one
argument model per tool whose JSON schema every tool surface publishes.

The agent tool (OpenAI function calling) and the MCP server offer the same tools with the
same arguments, limits and descriptions, because both are built from these models:
``SearchArguments.openai_tool()`` is the OpenAI function definition, the MCP server takes
each tool's signature from ``ToolArguments.signature()``, and ``tool_schema`` cleans
either's schema to the same plain JSON schema. A bad argument is said the same way
everywhere, in one line naming it (``ToolArguments.invalid_arguments``).

``check_query`` is the one rule for a query, used by the knowledge base, the tools and the
HTTP API (whose length limit is configurable; ``MAX_QUERY_CHARS`` is its default).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    StringConstraints,
    ValidationError,
)
from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from flexmatch.errors import QueryError, ToolCallError
from flexmatch.models.reading import (
    EXPAND_MODES,
    MAX_GREP_HITS,
    MAX_NEIGHBOURS,
    MAX_PATTERN_CHARS,
    MAX_READ_CHARS,
    ExpandMode,
)

MAX_QUERY_CHARS = 2_000
MAX_TOP_N = 20
MAX_LISTED = 500


def check_query(text: str, *, limit: int | None = None, what: str = "query") -> str:
    """``text`` if it is a valid query: not blank, and at most ``limit`` characters
    (None: any length; the knowledge base's own calls take long texts, such as a passage
    to find similar ones to). Else a ``QueryError`` whose ``code`` says which rule failed
    (``empty_query``, ``query_too_long``; ``what`` names the text in both)."""
    if not text.strip():
        raise QueryError(f"empty_{what}", f"the {what} is empty")
    if limit is not None and len(text) > limit:
        raise QueryError(
            f"{what}_too_long",
            f"the {what} is {len(text):,} characters, over the {limit:,}-character limit",
        )
    return text


def check_expand(value: object) -> ExpandMode:
    """``value`` as a search's expand mode, or a ``QueryError`` (``invalid_expand``)
    naming the choices: the rule every interface's ``expand`` keeps."""
    if value not in EXPAND_MODES:
        raise QueryError(
            "invalid_expand", f"expand must be one of {', '.join(EXPAND_MODES)}, not {value!r}"
        )
    return value


_BROKEN = object()


@dataclass(frozen=True)
class Must:
    """An argument's rule in words, checked: any way the argument fails it (its type
    included) and its absence are said as "'NAME' must be WORDS", one sentence a model
    can act on, rather than pydantic's report of the check that happened to fail."""

    words: str
    holds: Callable[[Any], bool] = bool

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        def check(value: Any, inner: core_schema.ValidatorFunctionWrapHandler) -> Any:
            try:
                valid = inner(value)
            except ValidationError:
                valid = _BROKEN
            if valid is _BROKEN or not self.holds(valid):
                raise PydanticCustomError("must", "must be {words}", {"words": self.words})
            return valid

        return core_schema.no_info_wrap_validator_function(check, handler(source))


def _is_query(text: str) -> bool:
    try:
        check_query(text, limit=MAX_QUERY_CHARS)
    except QueryError:
        return False
    return True


def _is_web_address(url: str) -> bool:
    return url.lower().startswith(("http://", "https://"))


Query = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS),
    Must(f"a non-empty string of at most {MAX_QUERY_CHARS:,} characters", _is_query),
]
WebAddress = Annotated[str, Must("an http(s) URL", _is_web_address)]
Record = Annotated[dict[str, Any], Field(min_length=1), Must("a non-empty JSON object")]
TopN = Annotated[
    int | None,
    Field(ge=1, le=MAX_TOP_N),
    Must(f"a whole number from 1 to {MAX_TOP_N}", lambda _: True),
]


def _annotation(field: FieldInfo) -> Any:
    """A field's type with its limits, rule and description, as one annotation."""
    return Annotated[(field.annotation, *field.metadata, Field(description=field.description))]


class ToolArguments(BaseModel):
    """The arguments of one tool: its name and description for the model, each field's
    type, limits and description, and no argument beyond them (a misspelt ``top_k`` or a
    ``tenant`` would otherwise do nothing, silently)."""

    model_config = ConfigDict(extra="forbid")

    tool_name: ClassVar[str]
    tool_description: ClassVar[str]

    @classmethod
    def parameters(cls) -> dict[str, Any]:
        """The arguments' JSON schema, as a tool's parameters."""
        return tool_schema(cls.model_json_schema())

    @classmethod
    def openai_tool(cls) -> dict[str, Any]:
        """The tool in the OpenAI function-calling format (which litellm passes on to
        every provider)."""
        return {
            "type": "function",
            "function": {
                "name": cls.tool_name,
                "description": cls.tool_description,
                "parameters": cls.parameters(),
            },
        }

    @classmethod
    def signature(cls) -> inspect.Signature:
        """The arguments as a function's keyword-only parameters, each annotated with its
        field's type, limits and description: how an SDK that reads a tool's arguments
        from its function (the MCP server's) takes them from this model."""
        parameters = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=_annotation(field),
                default=inspect.Parameter.empty if field.is_required() else field.default,
            )
            for name, field in cls.model_fields.items()
        ]
        return inspect.Signature(parameters)

    @classmethod
    def check(cls, arguments: Mapping[str, Any]) -> Self:
        """The arguments validated, or a ``ToolCallError`` naming each one at fault."""
        try:
            return cls.model_validate(arguments)
        except ValidationError as exc:
            raise ToolCallError(cls.invalid_arguments(exc)) from None

    @classmethod
    def unknown_arguments(cls, unknown: Iterable[str]) -> str:
        """Arguments the tool does not take, named with those it does: refused rather than
        dropped, so a model learns at once that its argument did nothing."""
        names = sorted(unknown)
        plural = "s" if len(names) > 1 else ""
        takes = ", ".join(cls.model_fields) or "none"
        message = (
            f"{cls.tool_name} does not take the argument{plural} "
            f"{', '.join(map(repr, names))} (it takes: {takes})"
        )
        if "tenant" in names:
            message += "; the tenant is set by the server: the API key's, or its --tenant"
        return message

    @classmethod
    def invalid_arguments(cls, error: ValidationError) -> str:
        """Pydantic's report on these arguments as one line: each argument at fault and
        what it must be, then any argument the tool does not take."""
        problems: list[str] = []
        unexpected: list[str] = []
        for item in error.errors(include_url=False):
            where = ".".join(str(part) for part in item["loc"]) or "the arguments"
            field = cls.model_fields.get(str(item["loc"][0])) if item["loc"] else None
            rule = next((m for m in field.metadata if isinstance(m, Must)), None) if field else None
            message = str(item["msg"])
            if item["type"] == "extra_forbidden":
                unexpected.append(where)
            elif item["type"] == "must":
                problems.append(f"'{where}' {message}")
            elif item["type"] == "missing" and rule is not None:
                problems.append(f"'{where}' must be {rule.words}")
            else:
                problems.append(f"'{where}': {message[:1].lower()}{message[1:]}")
        if unexpected and not problems:
            return cls.unknown_arguments(unexpected)
        if unexpected:
            problems.append(cls.unknown_arguments(unexpected))
        return f"invalid arguments for {cls.tool_name}: {'; '.join(problems)}"


class SearchArguments(ToolArguments):
    """``search_knowledge``: a question, and what to narrow the search to."""

    tool_name: ClassVar[str] = "search_knowledge"
    tool_description: ClassVar[str] = (
        "Search the knowledge base for the passages that best answer a question. Returns "
        "each passage with its source, title, context and the question it answers. Use it "
        "before answering questions about the stored documents."
    )

    query: Query = Field(description="What to look for, ideally as a full question.")
    top_n: TopN = Field(
        None,
        description="How many passages to return (default 5, or as the knowledge base is set up).",
    )
    source: str | None = Field(None, description="Only search this data source.")
    filters: dict[str, Any] | None = Field(
        None,
        description=(
            "Field conditions, all of which must match: source, document_id, chunk_id, "
            "match_kind, or metadata.<name> (a bare name means metadata.<name>); a list "
            "matches any of its values."
        ),
    )
    depth: Literal["fast", "deep"] = Field(
        "fast",
        description=(
            "'fast' (default): one search. 'deep': the first passages seed follow-up "
            "searches, for questions whose answer spans passages the question does not "
            "name (slower; the cost is reported)."
        ),
    )
    expand: ExpandMode | None = Field(
        None,
        description=(
            "'section' or 'neighbours': a short passage, or several from one section, comes "
            "with its section or the passages either side (context), within the knowledge "
            "base's budget; 'none'. Default: as the knowledge base is set up."
        ),
    )

    def passages(self, configured: int) -> int:
        """How many passages to return: ``top_n``, else the knowledge base's own number
        (``query.top_n``), never more than the tool's limit."""
        return self.top_n if self.top_n is not None else min(configured, MAX_TOP_N)


class ListDocumentsArguments(ToolArguments):
    """``list_documents``: a page of the stored documents."""

    tool_name: ClassVar[str] = "list_documents"
    tool_description: ClassVar[str] = (
        "The documents in the knowledge base: id, title, uri, source, status, chunks."
    )

    source: str | None = Field(None, description="Only this data source.")
    limit: int = Field(50, ge=1, le=MAX_LISTED, description="How many to list (default 50).")
    offset: int = Field(0, ge=0, description="How many to skip first (default 0).")


class GetDocumentArguments(ToolArguments):
    """``get_document``: one stored document, whole."""

    tool_name: ClassVar[str] = "get_document"
    tool_description: ClassVar[str] = (
        "A document with its chunks, the questions each answers, and its context."
    )

    document_id: str = Field(description="An id from list_documents.")


Span = Annotated[
    list[int] | None,
    Field(min_length=2, max_length=2),
    Must(
        "a first and a last number, [first, last], from 1", lambda v: v is None or 1 <= v[0] <= v[1]
    ),
]
Neighbours = Annotated[
    int,
    Field(ge=0, le=MAX_NEIGHBOURS),
    Must(f"a whole number from 0 to {MAX_NEIGHBOURS}", lambda _: True),
]


class OutlineArguments(ToolArguments):
    """``outline_document``: the headings of one document."""

    tool_name: ClassVar[str] = "outline_document"
    tool_description: ClassVar[str] = (
        "The headings of a document in order, each with its location (pages, lines) and "
        "the chunks under it: what to read next, with read_document(section=...)."
    )

    document_id: str = Field(description="A document_id from a search result or list_documents.")


class ReadArguments(ToolArguments):
    """``read_document``: part of one document."""

    tool_name: ClassVar[str] = "read_document"
    tool_description: ClassVar[str] = (
        "Read part of a document: a section (its heading path from outline_document, or "
        "one heading), a page range, a line range, or a chunk (a search result's "
        "chunk_index) with neighbours before and after it; name one (none: from the "
        f"beginning). At most {MAX_READ_CHARS:,} characters: when 'truncated', read on "
        "with chunk=next_chunk."
    )

    document_id: str = Field(description="A document_id from a search result or list_documents.")
    section: str | None = Field(
        None, description="A heading path, 'Guide › Install', or a heading."
    )
    pages: Span = Field(None, description="[first, last] page of a PDF (inclusive).")
    lines: Span = Field(None, description="[first, last] line of a text file (inclusive).")
    chunk: int | None = Field(None, ge=0, description="A chunk index (a result's chunk_index).")
    before: Neighbours = Field(0, description="Chunks to read before it (with chunk).")
    after: Neighbours = Field(0, description="Chunks to read after it (with chunk).")


class GrepArguments(ToolArguments):
    """``grep_knowledge``: an exact or regex search of the stored text."""

    tool_name: ClassVar[str] = "grep_knowledge"
    tool_description: ClassVar[str] = (
        "Find the exact text (a name, an identifier, a number) or a regular expression in "
        "the stored documents: every matching line, cited with its document, chunk and "
        "line or page. Use it when a search is too loose, e.g. for `max_retries`."
    )

    pattern: Annotated[
        str,
        StringConstraints(min_length=1, max_length=MAX_PATTERN_CHARS),
        Must(f"a non-empty string of at most {MAX_PATTERN_CHARS} characters"),
    ] = Field(description="The text to find, exactly (or a regular expression with regex).")
    regex: bool = Field(False, description="Read pattern as a regular expression.")
    ignore_case: bool = Field(False, description="Match upper and lower case alike.")
    source: str | None = Field(None, description="Only this data source.")
    filters: dict[str, Any] | None = Field(
        None, description="Field conditions, as search_knowledge takes them."
    )
    limit: int = Field(
        20,
        ge=1,
        le=MAX_GREP_HITS,
        description=f"How many lines at most (default 20, at most {MAX_GREP_HITS}).",
    )


class IngestUrlArguments(ToolArguments):
    """``ingest_url``: one public web page to import."""

    tool_name: ClassVar[str] = "ingest_url"
    tool_description: ClassVar[str] = (
        "Import a public web page into the knowledge base so it can be searched later. "
        "Private and local addresses are refused."
    )

    url: WebAddress = Field(description="A public http(s) URL.")
    source: str | None = Field(None, description="Data source to file it under.")


class AddRecordArguments(ToolArguments):
    """``add_record``: one structured fact to store."""

    tool_name: ClassVar[str] = "add_record"
    tool_description: ClassVar[str] = (
        "Store a structured fact (a JSON object, e.g. something learned in this "
        "conversation) in the knowledge base so it can be searched later."
    )

    record: Record = Field(
        description="The fact as a JSON object; give it an 'id' to update it later."
    )
    source: str | None = Field(
        None, description="A records source (default: the first one configured)."
    )


class FeedbackArguments(ToolArguments):
    """``give_feedback``: which passages answered a query, and which did not."""

    tool_name: ClassVar[str] = "give_feedback"
    tool_description: ClassVar[str] = (
        "Report the passages of a search_knowledge answer you used (helpful) or found "
        "wrong for the question (not helpful), by their chunk_id, with the query you "
        "searched: the knowledge base then finds them sooner (or later) for questions "
        "like it."
    )

    query: Query = Field(description="The query you searched, as you sent it.")
    chunk_ids: list[str] = Field(
        min_length=1,
        max_length=MAX_TOP_N,
        description="The chunk_id of each passage this is about.",
    )
    helpful: bool = Field(
        True, description="true (default): they answered the question; false: they did not."
    )


# every tool, by name, in the order they are offered
TOOL_ARGUMENTS: dict[str, type[ToolArguments]] = {
    model.tool_name: model
    for model in (
        SearchArguments,
        ListDocumentsArguments,
        GetDocumentArguments,
        OutlineArguments,
        ReadArguments,
        GrepArguments,
        IngestUrlArguments,
        AddRecordArguments,
        FeedbackArguments,
    )
}


def tool_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema of arguments as plain tool parameters, which every
    function-calling API reads alike: no titles, no defaults (the descriptions say them),
    an optional argument as its own type rather than "it or null" (leaving it out is how
    a model says none), every argument listed and no other taken."""
    required = list(schema.get("required", []))
    properties: dict[str, Any] = {}
    for name, raw in schema.get("properties", {}).items():
        prop = {k: v for k, v in raw.items() if k not in ("title", "default")}
        branches = prop.pop("anyOf", None)
        if branches is not None:
            kept = [b for b in branches if b != {"type": "null"}]
            prop = {**kept[0], **prop} if len(kept) == 1 else {"anyOf": kept, **prop}
        properties[name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
