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

from flexmatch import __version__, agent
from flexmatch.errors import FlexMatchError
from flexmatch.kb import DEFAULT_TENANT, KnowledgeBase

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


def build_server(
    kb: KnowledgeBase, *, tenant: str = DEFAULT_TENANT, read_only: bool = False
) -> MCPServer:
    """An MCP server whose tools act on ``kb`` within ``tenant``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    from flexmatch.service.keys import check_tenant

    check_tenant(tenant)
    server: MCPServer = MCPServer(
        "flexmatch", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    warm = _Warm(kb)
    writes = asyncio.Lock()  # one ingest at a time: a run repairs what others left pending
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def failed(exc: FlexMatchError) -> ToolError:
        return ToolError(str(exc))

    @server.tool(annotations=reading)
    async def search_knowledge(
        query: Annotated[str, Field(description="What to look for, ideally a full question.")],
        top_n: Annotated[
            int, Field(ge=1, le=agent.MAX_TOP_N, description="How many passages to return.")
        ] = 5,
        source: Annotated[str | None, Field(description="Only this data source.")] = None,
    ) -> str:
        """Search the knowledge base for the passages that best answer a question."""
        await warm.ready()
        try:
            result = await agent.search(kb, query, top_n=top_n, source=source, tenant=tenant)
        except FlexMatchError as exc:
            raise failed(exc) from exc
        return json.dumps(result, ensure_ascii=False)

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
        try:
            async with writes:
                result = await agent.ingest_url(kb, url, source=source, tenant=tenant)
        except FlexMatchError as exc:
            raise failed(exc) from exc
        return json.dumps(result, ensure_ascii=False)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
    async def add_record(
        record: Annotated[dict[str, Any], Field(description="The fact as a JSON object.")],
        source: Annotated[str | None, Field(description="A records source.")] = None,
    ) -> str:
        """Store a structured fact so it can be searched later."""
        await warm.ready()
        try:
            async with writes:
                result = await agent.add_record(kb, record, source=source, tenant=tenant)
        except FlexMatchError as exc:
            raise failed(exc) from exc
        return json.dumps(result, ensure_ascii=False)

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
                await asyncio.to_thread(self.kb.embedder.embed, ["warm up"])
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
