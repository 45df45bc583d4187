"""The six chain kinds, one abstract class each: what a chain of that kind takes and gives.

Every ``run`` is async, so the pipeline drives all kinds the same way; a chain that does
no I/O simply never awaits.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from flexmatch.engine.chains.base import Chain
from flexmatch.engine.chains.spec import ChainKind
from flexmatch.models import Document, MatchingText, SearchResult, Section
from flexmatch.results import ToolResult


class Chunker(Chain, ABC):
    """document → sections (each with its heading path)."""

    kind: ClassVar[ChainKind] = "chunker"

    @abstractmethod
    async def run(self, document: Document) -> list[Section]: ...


class MatchingTextChain(Chain, ABC):
    """section (+ its document) → the short texts that are embedded and matched."""

    kind: ClassVar[ChainKind] = "matching_text"

    @abstractmethod
    async def run(self, section: Section, document: Document) -> list[MatchingText]: ...

    def known_texts(self, section: Section, document: Document) -> list[MatchingText]:
        """Matching texts ``run`` returns whatever an LLM answers, known before it does
        (the chunk's own text): an ingest embeds them while the LLM works."""
        return []


class QualifyingTextChain(Chain, ABC):
    """section (+ its document) → what the document is and how the section fits in it."""

    kind: ClassVar[ChainKind] = "qualifying_text"

    @abstractmethod
    async def run(self, section: Section, document: Document) -> str: ...


class QueryTransform(Chain, ABC):
    """user text → the texts to search with, in matching-text form."""

    kind: ClassVar[ChainKind] = "query_transform"

    @abstractmethod
    async def run(self, query: str) -> list[str]: ...


class Reranker(Chain, ABC):
    """query + candidates → the candidates re-scored, best first."""

    kind: ClassVar[ChainKind] = "reranker"
    # False: ranks on ids, scores and signals alone, so the candidates' chunks are read
    # only for the results kept (the query path then reads 5 chunks, not top_k)
    reads_content: ClassVar[bool] = True

    @abstractmethod
    async def run(self, query: str, candidates: list[SearchResult]) -> list[SearchResult]: ...


class Formatter(Chain, ABC):
    """the tool result → the text an agent sees."""

    kind: ClassVar[ChainKind] = "formatter"

    @abstractmethod
    async def run(self, result: ToolResult) -> str: ...


KIND_BASES: dict[str, type[Chain]] = {
    base.kind: base
    for base in (
        Chunker,
        MatchingTextChain,
        QualifyingTextChain,
        QueryTransform,
        Reranker,
        Formatter,
    )
}
