"""LangChain: a retriever (``BaseRetriever``, sync and async) and its tool.

::

    retriever = FlexMatchRetriever(kb=KnowledgeBase.open("my-kb"), principal=alice)
    docs = retriever.invoke("Where is the spare key?")   # await retriever.ainvoke(...)
    tool = retriever_tool(kb, principal=alice)           # for any LangChain agent

``principal`` is the person the agent serves (``Principal(user="alice", groups=("hr",))``)
or ``flexmatch.ADMIN``: over a local knowledge base holding restricted documents, a
retriever without one refuses to search rather than reading them all.

Each ``Document`` holds the chunk's text, its id is the chunk id, and its metadata is
``common.result_metadata`` (ids, source, uri, title, heading path, location, citation,
score, matched text). ``kb`` may be a ``Client`` of a served knowledge base.
"""

from __future__ import annotations

from typing import Any, Literal

from flexmatch import ExpandMode, Scope, SearchResult
from flexmatch.service import require_extra

require_extra("langchain_core", "langchain", "The LangChain retriever")

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.prompts import PromptTemplate  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.tools import BaseTool, create_retriever_tool  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

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

# what the tool shows the model of each passage: where it is from, then its text
PASSAGE = PromptTemplate.from_template("[{cite}] {title}\n{page_content}")


def to_document(result: SearchResult) -> Document:
    """A search result as a LangChain ``Document``."""
    return Document(
        page_content=passage(result), metadata=result_metadata(result), id=result.chunk_id
    )


class FlexMatchRetriever(BaseRetriever):
    """A FlexMatch knowledge base (local or served) as a LangChain retriever."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kb: Searchable = Field(description="A KnowledgeBase, or a Client of a served one.")
    top_n: int = Field(5, ge=1, le=100, description="How many chunks to return.")
    filters: dict[str, Any] | None = Field(None, description="Search filters (source, ...).")
    tenant: str | None = Field(None, description="A local knowledge base's tenant.")
    principal: Scope | None = Field(
        None,
        description="The person the agent serves (a Principal), or flexmatch.ADMIN for "
        "everything; required over a knowledge base with restricted documents.",
    )

    depth: Literal["fast", "deep"] = Field(
        "fast", description="'deep': the first results seed follow-up searches (multi-hop)."
    )
    expand: ExpandMode | None = Field(
        None, description="'section' or 'neighbours': each passage with its surroundings."
    )

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        search_options(self.kb, **options_of(self))  # a bad option fails here, not on use

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [to_document(r) for r in search(self.kb, query, **options_of(self))]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [to_document(r) for r in await asearch(self.kb, query, **options_of(self))]


def retriever_tool(
    kb: Searchable | FlexMatchRetriever,
    *,
    name: str = TOOL_NAME,
    description: str = TOOL_DESCRIPTION,
    **options: Any,
) -> BaseTool:
    """The retriever as a tool an agent calls with a ``query``: the model reads each
    passage under its citation; the ``Document``s travel as the tool message's artifact.
    ``options`` are the retriever's (``top_n``, ``filters``, ``tenant``, ``principal``,
    ``depth``, ``expand``)."""
    retriever = kb if isinstance(kb, FlexMatchRetriever) else FlexMatchRetriever(kb=kb, **options)
    return create_retriever_tool(
        retriever,
        name,
        description,
        document_prompt=PASSAGE,
        response_format="content_and_artifact",
    )
