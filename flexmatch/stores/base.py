"""The store interface: one point per matching text, always scoped to a tenant.

Every method takes the tenant as a required argument, and the implementations add it
to every filter they send, so no caller can forget it.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

FilterValue = str | int | bool | list[str] | list[int]
Filters = dict[str, FilterValue]

DENSE = "dense"
LEXICAL = "lexical"
INDEXED_FIELDS = ("tenant", "document_id", "chunk_id", "source", "version")
STORE_META_KEYS = ("embedding_model", "dimension", "schema")
SCHEMA_VERSION = 1


class StoredPoint(BaseModel):
    """A matching text ready to write: its vector, the text for lexical search, and payload."""

    id: str
    vector: list[float]
    text: str
    payload: dict[str, Any] = Field(default_factory=dict)


class Hit(BaseModel):
    """A point returned by a search, with its similarity score."""

    id: str
    score: float
    payload: dict[str, Any]


class VectorStore(Protocol):
    def prepare(self, embedding_model: str, dimension: int) -> None:
        """Create the collection, or check it was built with this embedding model."""

    def upsert(self, tenant: str, points: list[StoredPoint]) -> None: ...

    def delete_document(
        self, tenant: str, document_id: str, *, keep_version: str | None = None
    ) -> None:
        """Remove a document's points (all but ``keep_version``'s, when given)."""

    def search(
        self, tenant: str, vector: list[float], limit: int, filters: Filters | None = None
    ) -> list[Hit]: ...

    def count(self, tenant: str, filters: Filters | None = None) -> int: ...

    def scroll(self, tenant: str, filters: Filters | None = None, limit: int = 10_000) -> list[Hit]:
        """Stored points (score 0) in a stable order, without a query vector."""

    def exists(self) -> bool:
        """Whether anything has been stored yet."""

    def close(self) -> None: ...


def scoped_conditions(
    tenant: str, filters: Filters | None, must_not: Filters | None = None
) -> tuple[list[tuple[str, FilterValue]], list[tuple[str, FilterValue]]]:
    """(must, must_not) field conditions, the tenant always first among the musts."""
    must: list[tuple[str, FilterValue]] = [("tenant", tenant), *(filters or {}).items()]
    return must, list((must_not or {}).items())


def lexical_embedder() -> Any:
    """BM25 term weights for the sparse vector (Qdrant applies IDF at query time)."""
    from qdrant_edge import Bm25

    return Bm25()


def mismatch_message(where: str, stored: dict[str, Any], model: str, dimension: int) -> str:
    return (
        f"{where} was indexed with embedding model '{stored.get('embedding_model')}' "
        f"({stored.get('dimension')} dimensions), but the config asks for '{model}' "
        f"({dimension} dimensions); set models.embedding back, or re-ingest into a new store"
    )
