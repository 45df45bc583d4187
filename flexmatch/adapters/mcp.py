"""The knowledge base as an MCP server (``flexmatch mcp``), on the official ``mcp`` SDK.

Tools: ``search_knowledge``, ``list_documents``, ``get_document``, the reading tools
(``outline_document``, ``read_document``, ``grep_knowledge``) and, unless read-only,
``ingest_url`` and (with a source of type ``records``) ``add_record``. Their descriptions
name the knowledge base's sources and what each holds (``description`` of a source, and
the ``mcp`` section of ``flexmatch.yaml``), so an agent knows what it can find before it
searches. Each tool (its arguments, limits, own sentence and operation) is defined once
in ``flexmatch.AGENT_TOOLS``, which the agent tool serves too. The server holds the
knowledge base open for its whole life (the embedded store admits one process at a
time). Transports:

- stdio, for a desktop client that starts the server: one tenant (``--tenant``);
- streamable HTTP (``--transport http``, at ``http://HOST:PORT/mcp``, said on start-up):
  every call carries an API key (``Authorization: Bearer fm_...``, the REST API's keys),
  which gives the tenant and the permissions (read for the reading tools, write for the
  others). Without keys (``--no-auth``) it serves ``--tenant``, only on a loopback address.

``tools/list`` shows a key only the tools it may call (a read-only key sees no writing
tools), and a call with an argument the tool does not take (``tenant``, a misspelt
``top_k``) is refused by name rather than silently dropped: the tenant always comes
from the key or ``--tenant``, and an agent learns at once that its argument did nothing.
Every failure (a bad argument, a refused URL, a record that could not be stored) is a
result with ``is_error`` set and one line saying why.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, cast

import typer
from pydantic import ValidationError

from flexmatch import (
    AGENT_TOOLS,
    DEFAULT_TENANT,
    GROUPS_HEADER,
    PRINCIPAL_HEADER,
    TOOL_ARGUMENTS,
    AgentTool,
    ConfigError,
    FlexMatchError,
    KeyRequestError,
    Principal,
    ToolArguments,
    ToolCaller,
    __version__,
    describe_tools,
    named_principal,
    tool_schema,
)
from flexmatch.adapters.command_line import (
    AsOption,
    GroupOption,
    HostOption,
    KbOption,
    PortOption,
    kb_folder,
    reader,
)
from flexmatch.service import grants, require_extra

if TYPE_CHECKING:  # the knowledge base and keys load when the server starts, not with the CLI
    from mcp.server.mcpserver import MCPServer

    from flexmatch import KnowledgeBase
    from flexmatch.service import ApiKey, KeyStore, Permission

Transport = Literal["stdio", "http"]

INSTRUCTIONS = (
    "FlexMatch is a knowledge base of documents, web pages and records, indexed by the "
    "questions each passage answers. Call search_knowledge with a question before answering "
    "from stored knowledge; cite the source of the passages you use."
)
READ_ONLY_TOOLS = tuple(name for name, tool in AGENT_TOOLS.items() if not tool.writes)
WRITE_TOOLS = tuple(name for name, tool in AGENT_TOOLS.items() if tool.writes)
TOOL_NEEDS: dict[str, Permission] = {
    **dict.fromkeys(READ_ONLY_TOOLS, "read"),
    **dict.fromkeys(WRITE_TOOLS, "write"),
    **{name: cast("Permission", tool.needs) for name, tool in AGENT_TOOLS.items() if tool.needs},
}

# The end user the current call's HTTP request names: never a tool argument, which the
# model (or a prompt injected into a passage it read) would choose.
_NAMED: ContextVar[Principal | None] = ContextVar("flexmatch_mcp_named", default=None)


def named_in(context: Any) -> Principal | None:
    """The end user the HTTP request of this call names in its headers (None: none, or
    not HTTP); a ``ConfigError`` naming the header when malformed."""
    try:
        request = context.request_context.request if context is not None else None
    except ValueError:  # no request: a call made in-process
        return None
    headers = getattr(request, "headers", None)
    return None if headers is None else named_principal(headers.get)


class _KeyVerifier:
    """The REST API's keys as MCP bearer tokens: the tenant rides in ``subject`` and the
    permissions in ``scopes`` of the access token the SDK hands to each tool call."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys
        self.verified: dict[str, ApiKey] = {}  # key id → the key as last verified

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        key = await asyncio.to_thread(self.keys.verify, token)
        if key is None:
            return None
        self.verified[key.id] = key  # who it reads as (see ``ApiKey.reader``)
        return AccessToken(
            token=token, client_id=key.id, scopes=list(key.permissions), subject=key.tenant
        )


ToolFunction = TypeVar("ToolFunction", bound=Callable[..., Any])


def takes(model: type[ToolArguments]) -> Callable[[ToolFunction], ToolFunction]:
    """Give a tool function ``model``'s arguments as its signature: the SDK builds a tool's
    input schema and checks its calls from its function's parameters, so the MCP tool
    takes exactly what the agent tool of the same name takes."""

    def signed(function: ToolFunction) -> ToolFunction:
        function.__signature__ = model.signature().replace(return_annotation=str)  # type: ignore[attr-defined]
        return function

    return signed


def build_server(
    kb: KnowledgeBase,
    *,
    tenant: str = DEFAULT_TENANT,
    read_only: bool = False,
    keys: KeyStore | None = None,
    url: str = "http://127.0.0.1:8000",
    principal: Principal | None = None,
) -> MCPServer:
    """An MCP server whose tools act on ``kb``: within ``tenant``, or, with ``keys``, within
    the tenant of the API key each HTTP call carries (``url`` is where it is served).
    Reads are as the end user the host application names (docs/security.md, "Access
    control"): with keys, the ``X-FlexMatch-Principal``/``X-FlexMatch-Groups`` headers of
    each HTTP request, as the key allows; without, those headers or else ``principal``
    (``flexmatch mcp --as``; None: everything). Never a tool argument. Writes are as the
    key's writer (``ApiKey.writer``), or that end user without keys: the knowledge base
    replaces no document they may not read."""
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.types import Tool, ToolAnnotations

    from flexmatch.service import check_tenant

    check_tenant(tenant)
    descriptions = describe_tools(kb)
    instructions = INSTRUCTIONS
    if kb.config.mcp.description.strip():
        instructions += f" This knowledge base: {kb.config.mcp.description.strip()}"
    auth: dict[str, Any] = {}
    verifier = _KeyVerifier(keys) if keys is not None else None
    if keys is not None:
        auth = {
            "token_verifier": verifier,
            "auth": AuthSettings(
                issuer_url=url,
                resource_server_url=f"{url}/mcp",
                validate_token_resource=False,  # our keys are not audience-bound tokens
            ),
        }

    def may_call(name: str) -> bool:
        """Whether this call's key (if keys are on) has the permission tool ``name`` needs."""
        if keys is None:
            return True
        token = get_access_token()
        scopes = token.scopes if token is not None else []
        return grants(scopes, TOOL_NEEDS.get(name, "admin"))

    class _Server(MCPServer):
        """Lists per key and refuses unknown arguments (the SDK would drop them)."""

        async def list_tools(self) -> list[Tool]:
            return [
                tool.model_copy(update={"input_schema": tool_schema(tool.input_schema)})
                for tool in await super().list_tools()
                if may_call(tool.name)
            ]

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            tool = self._tool_manager.get_tool(name)
            if tool is not None:
                takes = list(tool.parameters.get("properties", {}))
                unknown = sorted(set(arguments) - set(takes))
                if unknown:
                    raise ToolError(TOOL_ARGUMENTS[name].unknown_arguments(unknown))
            try:
                asked = _NAMED.set(named_in(context))
            except FlexMatchError as exc:
                raise ToolError(str(exc)) from None
            try:
                return await super().call_tool(name, arguments, context)
            except UnexpectedToolError as exc:  # a bug: said as one, its traceback logged
                raise UnexpectedToolError(
                    f"{exc}: an internal error (the server's log has the details)"
                ) from exc.__cause__
            except ToolError as exc:  # pydantic's report spans lines and links: one line
                if isinstance(exc.__cause__, ValidationError) and name in TOOL_ARGUMENTS:
                    said = TOOL_ARGUMENTS[name].invalid_arguments(exc.__cause__)
                    raise ToolError(said) from exc.__cause__
                raise
            finally:
                _NAMED.reset(asked)

    server: MCPServer = _Server(
        "flexmatch", instructions=instructions, version=__version__, log_level="WARNING", **auth
    )

    def caller(needs: Permission) -> str:
        """The tenant this call acts in, if the caller may do what it needs."""
        if keys is None:
            return tenant
        token = get_access_token()
        if token is None or not token.subject:
            raise ToolError("an API key is required")
        if not grants(token.scopes, needs):
            raise ToolError(f"this API key does not have the '{needs}' permission")
        return token.subject

    def acting() -> tuple[Principal | None, Principal | None]:
        """Who this call reads and writes as (docs/security.md, "Access control"): the
        user the request's headers name, else ``principal``, for a local server (neither:
        everything); with keys, the key's reader and writer of the named user."""
        named = _NAMED.get()
        if verifier is None:
            who = named if named is not None else principal
            return who, who
        token = get_access_token()
        key = verifier.verified.get(token.client_id) if token is not None else None
        if key is None:
            return Principal(), Principal()  # never wider than the whole tenant's
        try:
            return key.reader(named), key.writer(named)
        except KeyRequestError as exc:
            raise ToolError(str(exc)) from None

    warm = _Warm(kb)
    writes = asyncio.Lock()  # one ingest at a time: a run repairs what others left pending

    def serve(tool: AgentTool[Any]) -> None:
        """Offer ``tool`` (``AGENT_TOOLS``: its arguments, description and operation)."""
        needs: Permission = TOOL_NEEDS[tool.name]
        hints = ToolAnnotations(read_only_hint=not tool.writes, open_world_hint=tool.open_world)

        @server.tool(name=tool.name, annotations=hints, description=descriptions[tool.name])
        @takes(tool.arguments)
        async def call(**checked: Any) -> str:
            arguments = tool.arguments.model_construct(**checked)  # checked by the SDK
            scope = caller(needs)
            reader, writer = acting()
            if tool.embeds:
                await warm.ready()
            try:
                result = await tool.run(kb, arguments, ToolCaller(scope, reader, writer, writes))
            except FlexMatchError as exc:
                raise ToolError(str(exc)) from exc
            if tool.writes:
                return _succeeded(tool, result)
            return tool.text(result)

    for tool in AGENT_TOOLS.values():
        if tool.offered(kb, read_only=read_only):
            serve(tool)
    return server


def _succeeded(tool: AgentTool[Any], summary: dict[str, str]) -> str:
    """The outcome of a one-document write as the tool's JSON result, or a tool error
    (``is_error``) with its one line if it failed."""
    from mcp.server.mcpserver.exceptions import ToolError

    if summary["status"] == "failed":
        raise ToolError(f"{summary['input']}: {summary['detail'] or 'failed'}")
    return tool.text(summary)


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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run(
    kb_dir: Path,
    *,
    tenant: str = DEFAULT_TENANT,
    read_only: bool = False,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    auth: bool = True,
    principal: Principal | None = None,
) -> None:
    """Serve until the client disconnects (stdio) or the process is interrupted (http).

    Over HTTP every call needs an API key, unless ``auth`` is off, which only a loopback
    address allows."""
    if transport == "http" and not auth and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve MCP on {host} without API keys: drop --no-auth (calls then "
            "need a key from 'flexmatch keys create') or bind to 127.0.0.1"
        )
    if principal is not None and transport == "http" and auth:
        raise ConfigError(
            "--as/--group name the end user of a server without API keys (stdio or "
            f"--no-auth); with keys, the host application names them on each request "
            f"({PRINCIPAL_HEADER}, {GROUPS_HEADER}) for a service key"
        )
    from flexmatch import KnowledgeBase
    from flexmatch.service import KeyStore

    with KnowledgeBase.open(kb_dir) as kb:
        if transport == "stdio":
            build_server(kb, tenant=tenant, read_only=read_only, principal=principal).run("stdio")
            return
        import uvicorn

        listening = _listen(host, port)  # bound first: the URL said is one that answers
        port = listening.getsockname()[1]
        keys = KeyStore.for_kb(kb.path) if auth else None
        url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
        server = build_server(
            kb, tenant=tenant, read_only=read_only, keys=keys, url=url, principal=principal
        )
        app = server.streamable_http_app(host=host)
        who = (
            "every call needs an API key ('flexmatch keys create')"
            if auth
            else f"no API keys: serving tenant '{tenant}'"
        )
        print(
            f"FlexMatch MCP server (streamable HTTP) on {url}/mcp; {who}"
            f"{'; read-only' if read_only else ''}. Ctrl+C stops it.",
            file=sys.stderr,
            flush=True,
        )
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5)
        uvicorn.Server(config).run(sockets=[listening])


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or a ConfigError saying why not (in use, no
    such address) instead of uvicorn's log line and exit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family, backlog=128)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot listen on {host}:{port}: {reason.lower()}") from exc


def mcp(
    kb: KbOption = Path("."),
    tenant: Annotated[
        str, typer.Option(help="The tenant served over stdio (or over HTTP with --no-auth).")
    ] = DEFAULT_TENANT,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Offer no tools that write.")
    ] = False,
    transport: Annotated[
        str, typer.Option(help="stdio, or http (streamable HTTP at /mcp).")
    ] = "stdio",
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    no_auth: Annotated[
        bool,
        typer.Option("--no-auth", help="HTTP without API keys (loopback only): serves --tenant."),
    ] = False,
    as_user: AsOption = None,
    group: GroupOption = None,
) -> None:
    """Serve the knowledge base as an MCP server (stdio, or streamable HTTP where every
    call needs an API key from 'flexmatch keys create')."""
    require_extra("mcp", "mcp", "flexmatch mcp")
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("use stdio or http", param_hint="--transport")
    chosen: Transport = "stdio" if transport == "stdio" else "http"
    run(
        kb_folder(kb),
        tenant=tenant,
        read_only=read_only,
        transport=chosen,
        host=host,
        port=port,
        auth=not no_auth,
        principal=reader(as_user, group),  # without keys: the end user it reads as
    )


def add_commands(app: typer.Typer) -> None:
    """The ``flexmatch.commands`` entry point ``mcp``: the CLI adds the command so."""
    app.command()(mcp)
