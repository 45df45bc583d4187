"""The store interface: a thin, tenant-scoped layer over a Qdrant collection.

Every method takes the tenant as a required argument and the implementations add it to
every filter they send, and check it on every point they return, so no caller can
forget it. Higher-level rules (documents, versions, dedup) live in ``engine.documents``
and use only these operations, so both stores behave the same.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, Field

from flexmatch.engine.points import INDEXED_FIELDS, Filters, FilterValue
from flexmatch.payloads import check_payload

DENSE = "dense"
LEXICAL = "lexical"
__all__ = ["INDEXED_FIELDS", "FilterValue", "Filters", "check_payload"]
SCHEMA_VERSION = 3  # 3: point and record ids hash [tenant, id] as JSON


class StoredPoint(BaseModel):
    """A point to write. Matching texts have a vector and text; document records have none."""

    id: str
    vector: list[float] | None = None
    text: str = ""
    payload: dict[str, Any] = Field(default_factory=dict)


def check_points(points: list[StoredPoint]) -> None:
    """Every point of a write storable and readable back, or a ``PayloadError`` before any
    of them is written: the one funnel every writer goes through (see ``payloads``)."""
    for point in points:
        document = point.payload.get("document_id", "?")
        check_payload(point.payload, f"document '{str(document)[:200]}' (point {point.id})")


@dataclass(slots=True)
class Hit:
    """A point read back (score 0 when it was not found by similarity). A plain class:
    a query reads hundreds, where a model's validation would cost more than the search."""

    id: str
    payload: dict[str, Any]
    score: float = 0.0


@dataclass(frozen=True)
class Search:
    """One search of a batch: by dense ``vector`` or by BM25 over ``text``, among the points
    that match ``filters``; ``fields`` limits the payload returned (None: all of it; empty:
    none, only ids and scores, for a caller that knows what each search was for)."""

    limit: int
    vector: list[float] | None = None
    text: str | None = None
    filters: Filters | None = None
    fields: tuple[str, ...] | None = None
    exclude: Filters | None = None  # points matching any of these are left out


class VectorStore(Protocol):
    def prepare(self, embedding_model: str, dimension: int) -> None:
        """Create the collection, or check it was built with this embedding model."""

    def exists(self) -> bool:
        """Whether the collection has been created."""

    def check(self) -> None:
        """Open the store now (a server: reach it), or raise ``StoreError`` saying why it
        cannot be read; a store not created yet passes."""

    def recorded_model(self) -> str | None:
        """The embedding model the collection was built with; None before it exists."""

    def upsert(self, tenant: str, points: list[StoredPoint]) -> None: ...

    def delete(self, tenant: str, filters: Filters, must_not: Filters | None = None) -> None: ...

    def search(
        self, tenant: str, vector: list[float], limit: int, filters: Filters | None = None
    ) -> list[Hit]: ...

    def search_lexical(
        self, tenant: str, text: str, limit: int, filters: Filters | None = None
    ) -> list[Hit]:
        """BM25 over the stored texts (sparse vectors, IDF applied by Qdrant)."""

    def search_batch(self, tenant: str, searches: list[Search]) -> list[list[Hit]]:
        """Several searches in one round trip to the engine, results in their order."""

    def retrieve(self, tenant: str, ids: list[str]) -> list[Hit]:
        """Points by id; a point of another tenant is never returned."""

    def optimize(self, min_points: int) -> bool:
        """Build the search index (HNSW) once the store holds ``min_points`` points; True
        when anything was built."""

    def scroll(
        self, tenant: str, filters: Filters | None = None, limit: int = 100_000
    ) -> list[Hit]: ...

    def scroll_vectors(
        self,
        tenant: str,
        filters: Filters | None = None,
        limit: int = 100_000,
        fields: tuple[str, ...] | None = None,
    ) -> list[tuple[Hit, list[float]]]:
        """``scroll`` with each point's dense vector (points without one left out): what
        a changed document's unchanged texts reuse instead of being embedded again.
        ``fields``: the payload fields to read (None: all of it)."""
        ...

    def count(self, tenant: str, filters: Filters | None = None) -> int: ...

    def set_payload(self, tenant: str, filters: Filters, payload: dict[str, Any]) -> None:
        """Set ``payload``'s fields on every point matching ``filters`` (vectors kept)."""
        ...

    def size_bytes(self) -> int | None:
        """Bytes on disk, where the store knows it."""

    def close(self) -> None: ...


Scope = tuple[Filters | None, Filters | None]  # a search's filters, and what it excludes


class QueryMethods:
    """``search``, ``search_lexical`` and ``search_batch`` for a store that implements
    ``_query_batch``: Qdrant queries as (query, vector name, limit, scope, fields)."""

    def _query_batch(
        self, tenant: str, queries: list[tuple[Any, str, int, Scope, list[str] | None]]
    ) -> list[list[Hit]]:
        raise NotImplementedError

    def _sparse(self, sparse: Any) -> Any:
        return sparse

    def search_batch(self, tenant: str, searches: list[Search]) -> list[list[Hit]]:
        queries = []
        sent: list[int] = []  # which searches reach the engine
        for position, search in enumerate(searches):
            if search.vector is not None:
                query, using = search.vector, DENSE
            else:
                sparse = lexical_query(search.text or "")
                if sparse is None:  # only stopwords: nothing to match
                    continue
                query, using = self._sparse(sparse), LEXICAL
            fields = None if search.fields is None else [*search.fields]
            if fields:
                fields.insert(0, "tenant")
            queries.append((query, using, search.limit, (search.filters, search.exclude), fields))
            sent.append(position)
        results: list[list[Hit]] = [[] for _ in searches]
        if queries:
            answers = self._query_batch(tenant, queries)
            for position, planned, hits in zip(sent, queries, answers, strict=True):
                # hits without payload carry no data to check; the filter scoped them
                results[position] = hits if planned[4] == [] else in_tenant(tenant, hits)
        return results

    def search(
        self, tenant: str, vector: list[float], limit: int, filters: Filters | None = None
    ) -> list[Hit]:
        return self.search_batch(tenant, [Search(limit, vector=vector, filters=filters)])[0]

    def search_lexical(
        self, tenant: str, text: str, limit: int, filters: Filters | None = None
    ) -> list[Hit]:
        return self.search_batch(tenant, [Search(limit, text=text, filters=filters)])[0]


def scoped_conditions(
    tenant: str, filters: Filters | None, must_not: Filters | None = None
) -> tuple[list[tuple[str, FilterValue]], list[tuple[str, FilterValue]]]:
    """(must, must_not) field conditions, the tenant always first among the musts."""
    must: list[tuple[str, FilterValue]] = [("tenant", tenant), *(filters or {}).items()]
    return must, list((must_not or {}).items())


def in_tenant(tenant: str, hits: list[Hit]) -> list[Hit]:
    """Belt and braces: drop anything that is not the caller's tenant's."""
    return [hit for hit in hits if hit.payload.get("tenant") == tenant]


@functools.cache
def _bm25() -> Any:
    from qdrant_edge import Bm25

    return Bm25()


def lexical_document(text: str) -> Any:
    """BM25 term weights of a stored text (Qdrant applies IDF at query time)."""
    return _bm25().embed_document(text)


def lexical_query(text: str) -> Any | None:
    """The sparse query for ``text``; None when nothing is left (only stopwords)."""
    sparse = _bm25().embed_query(text)
    return sparse if sparse.indices else None


def mismatch_message(where: str, stored: dict[str, Any], model: str, dimension: int) -> str:
    return (
        f"{where} was indexed with embedding model '{stored.get('embedding_model')}' "
        f"({stored.get('dimension')} dimensions), but the config asks for '{model}' "
        f"({dimension} dimensions); set models.embedding back, or re-ingest into a new store"
    )
