"""What every framework adapter shares: the search call and the metadata of a result."""

from __future__ import annotations

from typing import Any

from flexmatch import (
    DEFAULT_TENANT,
    Client,
    ConfigError,
    ExpandMode,
    KnowledgeBase,
    Principal,
    Scope,
    SearchArguments,
    SearchResult,
    check_depth,
    check_expand,
    scoped,
)

# a local knowledge base or a served one: both answer ``query``/``aquery`` alike
Searchable = KnowledgeBase | Client

# the search tool's name and words, as the agent tool and the MCP server give them
TOOL_NAME = SearchArguments.tool_name
TOOL_DESCRIPTION = SearchArguments.tool_description


def search_options(
    kb: Searchable,
    top_n: int,
    filters: dict[str, Any] | None,
    tenant: str | None,
    principal: Scope | None = None,
    depth: str = "fast",
    expand: ExpandMode | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``kb.query``: a served knowledge base's tenant is its API
    key's, so naming one for a ``Client`` is refused rather than ignored. ``principal``:
    whom the search is for (``ADMIN``: everything); left out over a local knowledge base
    that holds restricted documents, the search is refused rather than reading them all
    (docs/security.md, "Integrations"). ``depth`` and ``expand`` as ``kb.query`` takes
    them, checked here so a bad one fails when the integration is made."""
    check_depth(depth)
    if expand is not None:
        check_expand(expand)
    options: dict[str, Any] = {"top_n": top_n, "filters": filters, "depth": depth}
    if expand is not None:
        options["expand"] = expand
    if isinstance(principal, Principal):
        options["principal"] = principal
    if tenant is not None:
        if not isinstance(kb, KnowledgeBase):
            raise ConfigError(
                f"tenant '{tenant}': a served knowledge base's tenant is the one its API key "
                "belongs to; leave tenant unset with a Client"
            )
        options["tenant"] = tenant
    check_scope(kb, tenant, principal)
    return options


def check_scope(kb: Searchable, tenant: str | None, principal: Scope | None) -> None:
    """The integrations' one scope rule (``flexmatch.scoped``) over a local knowledge
    base, checked when an integration is made and again on each search; a ``Client``
    reads as its API key allows, which the server decides."""
    if isinstance(kb, KnowledgeBase):
        scoped(kb, tenant if tenant is not None else DEFAULT_TENANT, principal)


RETRIEVER_OPTIONS = ("top_n", "filters", "tenant", "principal", "depth", "expand")


def options_of(retriever: Any) -> dict[str, Any]:
    """A framework retriever's search options, read from its attributes of those names
    (``search_options``' keywords), as they are at the time of the search."""
    return {name: getattr(retriever, name) for name in RETRIEVER_OPTIONS}


def search(kb: Searchable, query: str, **options: Any) -> list[SearchResult]:
    """``kb.query``'s results; ``options`` are ``search_options``' (``top_n``, ``filters``,
    ``tenant``, ``principal``, ``depth``, ``expand``)."""
    return kb.query(query, **search_options(kb, **options))


async def asearch(kb: Searchable, query: str, **options: Any) -> list[SearchResult]:
    return await kb.aquery(query, **search_options(kb, **options))


def passage(result: SearchResult) -> str:
    """The text an agent reads for a result: its section or neighbours when the search
    expanded it (``expand``), else its chunk."""
    context = result.context
    return context.text if context is not None and context.text else result.content


def _shown_cite(result: SearchResult) -> str:
    """Where the text ``passage`` gives is: the expanded context's place, else the hit's."""
    context = result.context
    return context.cite if context is not None and context.text and context.cite else result.cite


def result_metadata(result: SearchResult) -> dict[str, Any]:
    """A result's identity, place and scores as flat JSON values, for a framework's
    metadata: where it came from (ids, source, uri, title, heading path, location and a
    citation), how well it matched (score, the matched text) and the document's own
    metadata."""
    location = result.location
    return {
        "chunk_id": result.chunk_id,
        "document_id": result.document_id,
        "source": result.source,
        "uri": result.uri,
        "title": result.title,
        "heading_path": list(result.heading_path),
        "location": location.model_dump(exclude_none=True) if location is not None else None,
        "cite": _shown_cite(result),
        "score": result.score,
        "matched_text": result.matched_text,
        "qualifying_text": result.qualifying_text,
        "metadata": dict(result.metadata),
        "hop": result.signals.hop,  # deep search: the hop that found it, and by what query
        "found_by": result.signals.found_by,
        "context": (
            result.context.model_dump(exclude={"text"}) if result.context is not None else None
        ),
    }
