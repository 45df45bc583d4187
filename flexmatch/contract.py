"""``KnowledgeBaseProtocol``: the operations an embedded ``KnowledgeBase`` and a served
one (``Client``) share, with the same names, parameters, results and errors.

Code written against it runs on either: open one or the other and pass it along. The
searches take the end user they are for (``principal``: what that person may read; a
served one also needs a service or admin key to name one). What only one of them has
stays out: the tenant and chains of an embedded knowledge base, and whom its writes are
for; the jobs of a served one. mypy holds both classes to it (each module
ends with a function that returns its class as the protocol: it fails to type-check
when the class drifts), and tests/test_congruence.py runs each operation on both over
the same data and compares the results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from flexmatch.access import Principal
from flexmatch.engine.archive import Original
from flexmatch.models import (
    DocumentDetail,
    DocumentRecord,
    ExpandMode,
    FeedbackReceipt,
    GrepResult,
    IngestReport,
    Outline,
    Reading,
    SearchResult,
    Stats,
)
from flexmatch.results import Answer, Depth

Filters = dict[str, Any]
Progress = Callable[[IngestReport], None]


class KnowledgeBaseProtocol(Protocol):
    """A knowledge base, embedded or served: search it, ingest into it, read and remove
    its documents. Each operation is blocking, with an async twin prefixed ``a``.

    Both raise the same ``FlexMatchError`` subclasses for the same bad input (a served
    one may also raise ``ServiceError``: no answer, a bad key, overload, its limits).

    Where they differ: an embedded ``add_records`` renders records through any source's
    template (no source: the default one), a served one only through a records source
    (no source: the first); ``get_original`` has the file a document was uploaded as,
    which every ingest through ``Client`` is, while an embedded ``ingest`` reads files
    in place and keeps none."""

    # -- query ---------------------------------------------------------------------------
    def search(
        self,
        text: str,
        *,
        top_n: int | None = None,
        filters: Filters | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        principal: Principal | None = None,
    ) -> Answer:
        """The whole answer to ``text``: the variants searched, the results best first."""
        ...

    async def asearch(
        self,
        text: str,
        *,
        top_n: int | None = None,
        filters: Filters | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        principal: Principal | None = None,
    ) -> Answer: ...

    def query(
        self,
        text: str,
        *,
        top_n: int | None = None,
        filters: Filters | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        principal: Principal | None = None,
    ) -> list[SearchResult]:
        """The chunks that best answer ``text``, best first."""
        ...

    async def aquery(
        self,
        text: str,
        *,
        top_n: int | None = None,
        filters: Filters | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        principal: Principal | None = None,
    ) -> list[SearchResult]: ...

    def similar(
        self,
        text: str,
        *,
        top_n: int = 5,
        filters: Filters | None = None,
        principal: Principal | None = None,
    ) -> list[SearchResult]:
        """The chunks most similar to ``text``: no query rewrite, no reranking."""
        ...

    async def asimilar(
        self,
        text: str,
        *,
        top_n: int = 5,
        filters: Filters | None = None,
        principal: Principal | None = None,
    ) -> list[SearchResult]: ...

    # -- feedback ------------------------------------------------------------------------
    def add_feedback(
        self,
        query: str,
        chunk_id: str,
        helpful: bool = True,
        *,
        principal: Principal | None = None,
    ) -> FeedbackReceipt:
        """Whether ``chunk_id`` answered ``query``: helpful makes the query a learned
        matching text of the chunk, unhelpful demotes it for queries near this one."""
        ...

    async def aadd_feedback(
        self,
        query: str,
        chunk_id: str,
        helpful: bool = True,
        *,
        principal: Principal | None = None,
    ) -> FeedbackReceipt: ...

    # -- ingest --------------------------------------------------------------------------
    def ingest(
        self,
        inputs: Iterable[str | Path] = (),
        *,
        source: str | None = None,
        progress: Progress | None = None,
    ) -> IngestReport:
        """Files, folders and http(s) URLs into ``source``; the report once stored."""
        ...

    async def aingest(
        self,
        inputs: Iterable[str | Path] = (),
        *,
        source: str | None = None,
        progress: Progress | None = None,
    ) -> IngestReport: ...

    def ingest_urls(self, urls: Iterable[str], *, source: str | None = None) -> IngestReport:
        """Web pages only (anything else is refused, never read as a path)."""
        ...

    async def aingest_urls(
        self, urls: Iterable[str], *, source: str | None = None
    ) -> IngestReport: ...

    def add_records(self, records: Iterable[Any], *, source: str | None = None) -> IngestReport:
        """Structured records, through a records source's template."""
        ...

    async def aadd_records(
        self, records: Iterable[Any], *, source: str | None = None
    ) -> IngestReport: ...

    # -- documents -----------------------------------------------------------------------
    def list_documents(self, *, source: str | None = None) -> list[DocumentRecord]:
        """The documents, sorted by source and uri."""
        ...

    async def alist_documents(self, *, source: str | None = None) -> list[DocumentRecord]: ...

    def get_document(self, document_id: str) -> DocumentDetail:
        """A document with its chunks (``DocumentNotFoundError``: no such document)."""
        ...

    async def aget_document(self, document_id: str) -> DocumentDetail: ...

    def outline(self, document_id: str) -> Outline:
        """A document's headings, each with its location and chunks."""
        ...

    async def aoutline(self, document_id: str) -> Outline: ...

    def read(
        self,
        document_id: str,
        *,
        section: str | None = None,
        pages: tuple[int, int] | None = None,
        lines: tuple[int, int] | None = None,
        chunk: int | None = None,
        before: int = 0,
        after: int = 0,
    ) -> Reading:
        """Part of a document (a section, pages, lines, a chunk and its neighbours), bounded."""
        ...

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
    ) -> Reading: ...

    def grep(
        self,
        pattern: str,
        *,
        regex: bool = False,
        ignore_case: bool = False,
        filters: dict[str, Any] | None = None,
        limit: int = 20,
    ) -> GrepResult:
        """The lines of the stored text holding ``pattern`` (or matching it, ``regex``), cited."""
        ...

    async def agrep(
        self,
        pattern: str,
        *,
        regex: bool = False,
        ignore_case: bool = False,
        filters: dict[str, Any] | None = None,
        limit: int = 20,
    ) -> GrepResult: ...

    def get_original(self, document_id: str) -> Original:
        """The file a document was uploaded as (``DocumentNotFoundError``: none kept)."""
        ...

    async def aget_original(self, document_id: str) -> Original: ...

    def remove_document(self, document_id: str) -> None:
        """Remove a document and everything derived from it."""
        ...

    async def aremove_document(self, document_id: str) -> None: ...

    def stats(self) -> Stats:
        """Documents, chunks and matching texts, per source."""
        ...

    async def astats(self) -> Stats: ...

    def close(self) -> None:
        """Release what it holds (store, workers; connections)."""
        ...
