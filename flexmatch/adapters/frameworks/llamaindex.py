"""LlamaIndex: a retriever (``BaseRetriever``, sync and async) and its ``RetrieverTool``.

::

    retriever = FlexMatchRetriever(KnowledgeBase.open("my-kb"), principal=alice)
    nodes = retriever.retrieve("Where is the spare key?")   # await retriever.aretrieve(...)
    tool = retriever_tool(kb, principal=alice)              # for a LlamaIndex agent

``principal`` is the person the agent serves (``Principal(user="alice", groups=("hr",))``)
or ``flexmatch.ADMIN``: over a local knowledge base holding restricted documents, a
retriever without one refuses to search rather than reading them all.

Each ``NodeWithScore`` holds a ``TextNode`` whose id is the chunk id and whose metadata is
``common.result_metadata``; a language model is shown the citation and title with the text,
not the ids and scores. ``kb`` may be a ``Client`` of a served knowledge base.
"""

from __future__ import annotations

from typing import Any, Literal

from flexmatch import ExpandMode, Scope, SearchResult
from flexmatch.service import require_extra

require_extra("llama_index.core", "llamaindex", "The LlamaIndex retriever")

from llama_index.core.callbacks import CallbackManager  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.core.tools import RetrieverTool  # noqa: E402

from flexmatch.adapters.frameworks.common import (  # noqa: E402
    TOOL_DESCRIPTION,
    TOOL_NAME,
    Searchable,
    asearch,
    options_of,
    passage,
    result_metadata,
    search,
    search_options,
)

# what a language model reading a node sees beside its text
SHOWN_TO_LLM = ("cite", "title")


def to_node(result: SearchResult) -> NodeWithScore:
    """A search result as a LlamaIndex node with its score."""
    metadata = result_metadata(result)
    node = TextNode(
        id_=result.chunk_id,
        text=passage(result),
        metadata=metadata,
        excluded_llm_metadata_keys=[k for k in metadata if k not in SHOWN_TO_LLM],
        excluded_embed_metadata_keys=list(metadata),
    )
    return NodeWithScore(node=node, score=result.score)


class FlexMatchRetriever(BaseRetriever):
    """A FlexMatch knowledge base (local or served) as a LlamaIndex retriever."""

    def __init__(
        self,
        kb: Searchable,
        *,
        top_n: int = 5,
        filters: dict[str, Any] | None = None,
        tenant: str | None = None,
        principal: Scope | None = None,
        depth: Literal["fast", "deep"] = "fast",
        expand: ExpandMode | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        """``principal``: the person the agent serves, or ``flexmatch.ADMIN`` for
        everything; required over a knowledge base with restricted documents. ``depth``
        ``"deep"``: the first results seed follow-up searches (multi-hop); ``expand``
        ``"section"`` or ``"neighbours"``: each passage with its surroundings."""
        super().__init__(callback_manager=callback_manager)
        self.kb = kb
        self.top_n = top_n
        self.filters = filters
        self.tenant = tenant
        self.principal = principal
        self.depth = depth
        self.expand = expand
        search_options(kb, **options_of(self))  # a bad option fails here, not on use

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [to_node(r) for r in search(self.kb, query_bundle.query_str, **options_of(self))]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = await asearch(self.kb, query_bundle.query_str, **options_of(self))
        return [to_node(r) for r in found]


def retriever_tool(
    kb: Searchable | FlexMatchRetriever,
    *,
    name: str = TOOL_NAME,
    description: str = TOOL_DESCRIPTION,
    **options: Any,
) -> RetrieverTool:
    """The retriever as a LlamaIndex ``RetrieverTool``; ``options`` are the retriever's."""
    retriever = kb if isinstance(kb, FlexMatchRetriever) else FlexMatchRetriever(kb, **options)
    return RetrieverTool.from_defaults(retriever=retriever, name=name, description=description)
