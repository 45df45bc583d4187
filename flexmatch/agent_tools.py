"""The knowledge base's agent tools, each defined once: its arguments and description (the
argument model in ``flexmatch.tools``), what it needs, and its operation. The agent tool
(``adapters/agent.py``, OpenAI function calling) and the MCP server (``adapters/mcp.py``)
both serve these definitions, so a tool cannot do one thing in one and another in the
other: an access rule, a source check, a result's shape are written here only.

An operation takes the knowledge base, its checked arguments and a ``ToolCaller``: the
tenant, and who reads and who writes, which the application sets (an API key, the host
application's headers, the agent's owner), never the model.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from flexmatch.access import DEFAULT_TENANT, Everything, Principal, Scope, check_sets_no_access
from flexmatch.config import KBConfig, SourceConfig
from flexmatch.errors import ConfigError, DocumentNotFoundError
from flexmatch.models import (
    DocumentDetail,
    DocumentRecord,
    ExpandMode,
    FeedbackReceipt,
    GrepResult,
    IngestReport,
    Outline,
    Reading,
)
from flexmatch.results import Answer, Depth
from flexmatch.tools import (
    AddRecordArguments,
    FeedbackArguments,
    GetDocumentArguments,
    GrepArguments,
    IngestUrlArguments,
    ListDocumentsArguments,
    OutlineArguments,
    ReadArguments,
    SearchArguments,
    ToolArguments,
)


class KnowledgeBase(Protocol):
    """What the tools use of a ``flexmatch.KnowledgeBase`` (said here, not imported: the
    definitions load with the CLI that lists the commands, the knowledge base when a
    tool runs)."""

    @property
    def config(self) -> KBConfig: ...

    def choose_source(self, name: object = None, *, records: bool = False) -> str: ...

    def has_restricted_documents(self, *, tenant: str = DEFAULT_TENANT) -> bool: ...

    async def asearch(
        self,
        text: str,
        *,
        top_n: int | None = None,
        filters: dict[str, Any] | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> Answer: ...

    async def aformat_answer(self, answer: Answer, formatter: str | None = None) -> str: ...

    def list_documents(
        self,
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> list[DocumentRecord]: ...

    def get_document(
        self, document_id: str, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None
    ) -> DocumentDetail: ...

    async def aoutline(
        self, document_id: str, *, tenant: str = DEFAULT_TENANT, principal: Principal | None = None
    ) -> Outline: ...

    async def aread(
        self,
        document_id: str,
        *,
        section: str | None = None,
        pages: tuple[int, int] | None = None,
        lines: tuple[int, int] | None = None,
        chunk: int | None = None,
        before: int = 0,
        after: int = 0,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> Reading: ...

    async def agrep(
        self,
        pattern: str,
        *,
        regex: bool = False,
        ignore_case: bool = False,
        filters: dict[str, Any] | None = None,
        limit: int = 20,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> GrepResult: ...

    async def afetch_pages(
        self, urls: Iterable[str], *, source: str | None = None
    ) -> list[Any]: ...

    async def aingest_documents(
        self,
        documents: Iterable[Any],
        *,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> IngestReport: ...

    async def aadd_records(
        self,
        records: Iterable[Any],
        *,
        source: str | None = None,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> IngestReport: ...

    async def aadd_feedback(
        self,
        query: str,
        chunk_id: str,
        helpful: bool = True,
        *,
        tenant: str = DEFAULT_TENANT,
        principal: Principal | None = None,
    ) -> FeedbackReceipt: ...


Arguments = TypeVar("Arguments", bound=ToolArguments)
Result = dict[str, Any]
LISTED_FIELDS = {"id", "title", "uri", "source", "status", "chunks"}


def scoped(kb: KnowledgeBase, tenant: str, principal: Scope | None) -> Principal | None:
    """Whom an integration (the agent tool, a framework's retriever or tool) reads and
    writes as over a local knowledge base: ``principal``, ``ADMIN`` meaning everything
    (None, the knowledge base's own spelling). Left out while some of the tenant's
    documents are not for everyone, it is refused rather than handing them all to an
    agent; checked on every call, as documents come and go."""
    if isinstance(principal, Everything):
        return None
    if principal is None and kb.has_restricted_documents(tenant=tenant):
        raise ConfigError(
            "this knowledge base has documents restricted to some people: pass "
            "principal=Principal(user=..., groups=...) for the person the agent serves, "
            "or principal=flexmatch.ADMIN to read everything"
        )
    return principal


@dataclass(frozen=True)
class ToolCaller:
    """Who a tool call acts for: its ``tenant``, who it reads as (``reader``) and who it
    writes as (``writer``), None meaning everything (an admin). ``writes``: held around
    each write (a server runs one ingest at a time)."""

    tenant: str = DEFAULT_TENANT
    reader: Principal | None = None
    writer: Principal | None = None
    writes: contextlib.AbstractAsyncContextManager[Any] = field(
        default_factory=contextlib.nullcontext
    )

    @classmethod
    def acting_as(cls, principal: Principal | None, tenant: str = DEFAULT_TENANT) -> ToolCaller:
        """One person (or None: everything) who both reads and writes."""
        return cls(tenant=tenant, reader=principal, writer=principal)


@dataclass(frozen=True)
class AgentTool(Generic[Arguments]):
    """One tool: its arguments (name, description, schema, checks), whether it writes,
    reaches outside the knowledge base (``open_world``), embeds (a server warms the model
    first) or needs a records source, and its operation."""

    arguments: type[Arguments]
    operation: Callable[[KnowledgeBase, Arguments, ToolCaller], Awaitable[Result]]
    writes: bool = False
    open_world: bool = False
    embeds: bool = False
    records: bool = False
    indent: int | None = None  # of its JSON text (``text``)
    needs: str | None = None  # the key permission it needs (None: read, or write if it writes)

    @property
    def name(self) -> str:
        return self.arguments.tool_name

    def offered(self, kb: KnowledgeBase, *, read_only: bool = False) -> bool:
        """Whether ``kb`` offers this tool: a writing one not when read-only, one that
        needs a records source not without one (it could only fail)."""
        if self.writes and read_only:
            return False
        return not self.records or any(s.type == "records" for s in kb.config.sources.values())

    async def run(
        self, kb: KnowledgeBase, arguments: dict[str, Any] | Arguments, caller: ToolCaller
    ) -> Result:
        """The operation on ``arguments`` (checked here unless already a model), as
        ``caller``; a ``FlexMatchError`` says what went wrong in one line."""
        checked = (
            arguments if isinstance(arguments, self.arguments) else self.arguments.check(arguments)  # type: ignore[arg-type]
        )
        return await self.operation(kb, checked, caller)

    def text(self, result: Result) -> str:
        """``result`` as the tool's JSON text, the same from every surface (the search's
        as ``flexmatch query --json`` and ``KnowledgeBase.format`` print it)."""
        return json.dumps(result, ensure_ascii=False, indent=self.indent)


def _source(kb: KnowledgeBase, name: str | None, *, records: bool = False) -> str | None:
    """The source a call names, checked (``SourceChoiceError`` names the choices)."""
    if name is None and not records:
        return None
    return kb.choose_source(name, records=records)


# -- the operations ------------------------------------------------------------------------
async def search_knowledge(
    kb: KnowledgeBase, arguments: SearchArguments, caller: ToolCaller
) -> Result:
    """The JSON tool result of ``flexmatch query --json``, of what the reader may read."""
    name = _source(kb, arguments.source)
    named = {"source": name} if name is not None else {}
    answer = await kb.asearch(
        arguments.query,
        top_n=arguments.passages(kb.config.query.top_n),
        filters={**(arguments.filters or {}), **named} or None,
        depth=arguments.depth,
        expand=arguments.expand,
        tenant=caller.tenant,
        principal=caller.reader,
    )
    result: Result = json.loads(await kb.aformat_answer(answer, "json"))
    return result


async def list_documents(
    kb: KnowledgeBase, arguments: ListDocumentsArguments, caller: ToolCaller
) -> Result:
    """A page of the documents the reader may read (an unknown source is said)."""
    records = kb.list_documents(
        source=_source(kb, arguments.source), tenant=caller.tenant, principal=caller.reader
    )
    first = arguments.offset
    page = [
        record.model_dump(mode="json", include=LISTED_FIELDS)
        for record in records[first : first + arguments.limit]
    ]
    return {"total": len(records), "documents": page}


async def get_document(
    kb: KnowledgeBase, arguments: GetDocumentArguments, caller: ToolCaller
) -> Result:
    """One document, whole; one the reader may not read is not found, like a missing one."""
    detail = kb.get_document(arguments.document_id, tenant=caller.tenant, principal=caller.reader)
    return detail.model_dump(mode="json")


async def outline_document(
    kb: KnowledgeBase, arguments: OutlineArguments, caller: ToolCaller
) -> Result:
    """A document's headings; one the reader may not read is not found."""
    outline = await kb.aoutline(
        arguments.document_id, tenant=caller.tenant, principal=caller.reader
    )
    return outline.model_dump(mode="json", exclude_none=True)


def _span(span: list[int] | None) -> tuple[int, int] | None:
    return (span[0], span[1]) if span is not None else None


async def read_document(kb: KnowledgeBase, arguments: ReadArguments, caller: ToolCaller) -> Result:
    """Part of a document, bounded; one the reader may not read is not found."""
    reading = await kb.aread(
        arguments.document_id,
        section=arguments.section,
        pages=_span(arguments.pages),
        lines=_span(arguments.lines),
        chunk=arguments.chunk,
        before=arguments.before,
        after=arguments.after,
        tenant=caller.tenant,
        principal=caller.reader,
    )
    return reading.model_dump(mode="json", exclude_none=True)


async def grep_knowledge(kb: KnowledgeBase, arguments: GrepArguments, caller: ToolCaller) -> Result:
    """The matching lines of what the reader may read, cited (an unknown source is said)."""
    name = _source(kb, arguments.source)
    named = {"source": name} if name is not None else {}
    found = await kb.agrep(
        arguments.pattern,
        regex=arguments.regex,
        ignore_case=arguments.ignore_case,
        filters={**(arguments.filters or {}), **named} or None,
        limit=arguments.limit,
        tenant=caller.tenant,
        principal=caller.reader,
    )
    return found.model_dump(mode="json", exclude_none=True)


async def ingest_url(
    kb: KnowledgeBase, arguments: IngestUrlArguments, caller: ToolCaller
) -> Result:
    """One web page imported under the web safety rules (fetched outside the write lock:
    a slow server holds up no other write), as the writer; what happened to it."""
    pages = await kb.afetch_pages([arguments.url], source=_source(kb, arguments.source))
    async with caller.writes:
        report = await kb.aingest_documents(pages, tenant=caller.tenant, principal=caller.writer)
    return report.outcome(arguments.url).summary()


async def add_record(
    kb: KnowledgeBase, arguments: AddRecordArguments, caller: ToolCaller
) -> Result:
    """One record stored through a records source's template, as the writer; only an
    admin says who may read it (``record.access``), as over the HTTP API."""
    if "access" in arguments.record:
        check_sets_no_access(caller.writer, "record.access")
    name = _source(kb, arguments.source, records=True)
    async with caller.writes:
        report = await kb.aadd_records(
            [arguments.record], source=name, tenant=caller.tenant, principal=caller.writer
        )
    return report.outcome("record").summary()


async def give_feedback(
    kb: KnowledgeBase, arguments: FeedbackArguments, caller: ToolCaller
) -> Result:
    """Each passage marked as the reader (one it may not read is not found, like a
    missing one): what was kept of each."""
    kept: list[Result] = []
    for chunk_id in dict.fromkeys(arguments.chunk_ids):
        try:
            receipt = await kb.aadd_feedback(
                arguments.query,
                chunk_id,
                arguments.helpful,
                tenant=caller.tenant,
                principal=caller.reader,
            )
        except DocumentNotFoundError as exc:
            kept.append({"chunk_id": chunk_id, "error": str(exc)})
            continue
        kept.append(receipt.model_dump(mode="json", exclude_none=True))
    return {"feedback": kept}


# every tool, by name, in the order they are offered (``TOOL_ARGUMENTS``' order)
AGENT_TOOLS: dict[str, AgentTool[Any]] = {
    tool.name: tool
    for tool in (
        AgentTool(SearchArguments, search_knowledge, embeds=True, indent=2),
        AgentTool(ListDocumentsArguments, list_documents),
        AgentTool(GetDocumentArguments, get_document),
        AgentTool(OutlineArguments, outline_document),
        AgentTool(ReadArguments, read_document),
        AgentTool(GrepArguments, grep_knowledge),
        AgentTool(IngestUrlArguments, ingest_url, writes=True, open_world=True, embeds=True),
        AgentTool(AddRecordArguments, add_record, writes=True, embeds=True, records=True),
        AgentTool(FeedbackArguments, give_feedback, embeds=True, needs="feedback"),
    )
}


# -- the descriptions a server gives --------------------------------------------------------
def _source_lines(sources: dict[str, SourceConfig]) -> str:
    return "\n".join(
        f"- {name} ({source.type})"
        + (f": {source.description.strip()}" if source.description else "")
        for name, source in sources.items()
    )


def describe_tools(kb: KnowledgeBase) -> dict[str, str]:
    """Each tool's description for ``kb``: the configured one (``mcp.tools``) or the
    built-in one, then what an agent needs to choose a ``source``: the sources it may
    name, each with its type and ``description`` (the knowledge base's own
    ``mcp.description`` first)."""
    config = kb.config
    sources = config.sources
    records = {n: s for n, s in sources.items() if s.type == "records"}
    about = config.mcp.description.strip()
    own = {
        name: config.mcp.tools.get(name, tool.arguments.tool_description).strip()
        for name, tool in AGENT_TOOLS.items()
    }
    search = own["search_knowledge"]
    if about:
        search += f"\n\nThe knowledge base: {about}"
    return {
        "search_knowledge": f"{search}\n\nSources (name one as `source` to search only it):\n"
        + _source_lines(sources),
        "list_documents": f"{own['list_documents']}\n\nSources:\n{_source_lines(sources)}",
        "get_document": own["get_document"],
        "outline_document": own["outline_document"],
        "read_document": own["read_document"],
        "grep_knowledge": f"{own['grep_knowledge']}\n\nSources:\n{_source_lines(sources)}",
        "give_feedback": own["give_feedback"],
        "ingest_url": f"{own['ingest_url']}\n\nSources it can be filed under (default: "
        f"{config.default_source}):\n{_source_lines(sources)}",
        "add_record": f"{own['add_record']}\n\nRecords sources (default: "
        f"{kb.choose_source(None, records=True) if records else 'none'}):\n"
        + _source_lines(records),
    }
