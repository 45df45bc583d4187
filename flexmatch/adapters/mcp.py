"""The knowledge base as an MCP server (``flexmatch mcp``), on the official ``mcp`` SDK.

Tools: ``search_knowledge``, ``list_documents``, ``get_document`` and, unless read-only,
``ingest_url`` and ``add_record``. One server process serves one tenant (``--tenant``)
and holds the knowledge base open for its whole life (the embedded store admits one
process at a time). Transports: stdio (for a desktop client that starts the server) and
streamable HTTP (``--transport http``, at ``http://HOST:PORT/mcp``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from flexmatch import (
    DEFAULT_TENANT,
    FlexMatchError,
    KnowledgeBase,
    __version__,
    check_tenant,
)

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

Transport = Literal["stdio", "http"]

INSTRUCTIONS = (
    "FlexMatch is a knowledge base of documents, web pages and records, indexed by the "
    "questions each passage answers. Call search_knowledge with a question before answering "
    "from stored knowledge; cite the source of the passages you use."
)
READ_ONLY_TOOLS = ("search_knowledge", "list_documents", "get_document")
WRITE_TOOLS = ("ingest_url", "add_record")
MAX_TOP_N = 20
MAX_QUERY_CHARS = 2_000


def build_server(
    kb: KnowledgeBase, *, tenant: str = DEFAULT_TENANT, read_only: bool = False
) -> MCPServer:
    """An MCP server whose tools act on ``kb`` within ``tenant``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    check_tenant(tenant)
    server: MCPServer = MCPServer(
        "flexmatch", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    warm = _Warm(kb)
    writes = asyncio.Lock()  # one ingest at a time: a run repairs what others left pending
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def failed(exc: FlexMatchError) -> ToolError:
        return ToolError(str(exc))

    def source_of(name: str | None, *, records: bool = False) -> str | None:
        if name is None and not records:
            return None
        return kb.choose_source(name, records=records)

    @server.tool(annotations=reading)
    async def search_knowledge(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="What to look for, ideally a full question.",
            ),
        ],
        top_n: Annotated[
            int, Field(ge=1, le=MAX_TOP_N, description="How many passages to return.")
        ] = 5,
        source: Annotated[str | None, Field(description="Only this data source.")] = None,
    ) -> str:
        """Search the knowledge base for the passages that best answer a question.

        Returns the same JSON tool result as ``flexmatch query --json``."""
        await warm.ready()
        try:
            name = source_of(source)
            filters = {"source": name} if name is not None else None
            answer = await kb.asearch(query, top_n=top_n, filters=filters, tenant=tenant)
            return await kb.aformat_answer(answer, "json")
        except FlexMatchError as exc:
            raise failed(exc) from exc

    # async, so they run on the server's loop like every other call on the knowledge base
    @server.tool(annotations=reading)
    async def list_documents(
        source: Annotated[str | None, Field(description="Only this data source.")] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> str:
        """The documents in the knowledge base: id, title, uri, source, status, chunks."""
        try:
            records = kb.list_documents(source=source, tenant=tenant)
        except FlexMatchError as exc:
            raise failed(exc) from exc
        page = [
            r.model_dump(include={"id", "title", "uri", "source", "status", "chunks"})
            for r in records[offset : offset + limit]
        ]
        return json.dumps({"total": len(records), "documents": page}, ensure_ascii=False)

    @server.tool(annotations=reading)
    async def get_document(
        document_id: Annotated[str, Field(description="An id from list_documents.")],
    ) -> str:
        """A document with its chunks, the questions each answers, and its context."""
        try:
            detail = kb.get_document(document_id, tenant=tenant)
        except FlexMatchError as exc:
            raise failed(exc) from exc
        return detail.model_dump_json()

    if read_only:
        return server

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=True))
    async def ingest_url(
        url: Annotated[str, Field(description="A public http(s) URL.")],
        source: Annotated[str | None, Field(description="Data source to file it under.")] = None,
    ) -> str:
        """Import a web page (private and local addresses are refused)."""
        await warm.ready()
        if not url.lower().startswith(("http://", "https://")):
            raise ToolError("'url' must be an http(s) URL")
        try:  # fetched outside the write lock: a slow server holds up no other import
            pages = await kb.afetch_pages([url], source=source_of(source))
            async with writes:
                report = await kb.aingest_documents(pages, tenant=tenant)
        except FlexMatchError as exc:
            raise failed(exc) from exc
        return json.dumps(report.outcome(url).summary(), ensure_ascii=False)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
    async def add_record(
        record: Annotated[dict[str, Any], Field(description="The fact as a JSON object.")],
        source: Annotated[str | None, Field(description="A records source.")] = None,
    ) -> str:
        """Store a structured fact so it can be searched later."""
        await warm.ready()
        if not record:
            raise ToolError("'record' must be a non-empty JSON object")
        try:
            name = source_of(source, records=True)
            async with writes:
                report = await kb.aadd_records([record], source=name, tenant=tenant)
        except FlexMatchError as exc:
            raise failed(exc) from exc
        return json.dumps(report.outcome("record").summary(), ensure_ascii=False)

    return server


class _Warm:
    """Loads the embedding model once, so concurrent first calls do not each load it."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.done = False
        self._lock = asyncio.Lock()

    async def ready(self) -> None:
        if self.done:
            return
        async with self._lock:
            if not self.done:
                await asyncio.to_thread(self.kb.warm_up)
                self.done = True


def run(
    kb_dir: Path,
    *,
    tenant: str = DEFAULT_TENANT,
    read_only: bool = False,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
) -> None:
    """Serve until the client disconnects (stdio) or the process is interrupted (http)."""
    with KnowledgeBase.open(kb_dir) as kb:
        server = build_server(kb, tenant=tenant, read_only=read_only)
        if transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=host, port=port)
