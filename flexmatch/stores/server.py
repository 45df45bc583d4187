"""A Qdrant server or cluster through qdrant-client (``store.url``), for data that outgrows
one machine. ``url: ":memory:"`` runs qdrant-client's in-process engine, which speaks the
same API and is what the tests use.
"""

from __future__ import annotations

from typing import Any

from flexmatch.errors import ModelMismatchError, StoreError
from flexmatch.stores.base import (
    DENSE,
    INDEXED_FIELDS,
    LEXICAL,
    SCHEMA_VERSION,
    Filters,
    Hit,
    StoredPoint,
    lexical_embedder,
    mismatch_message,
    scoped_conditions,
)


class ServerStore:
    """One collection on a Qdrant server; tenants share it, filtered on every call."""

    def __init__(self, url: str, api_key: str | None, collection: str) -> None:
        from qdrant_client import QdrantClient

        self.url = url
        self.collection = collection
        try:
            if url == ":memory:":
                self._client = QdrantClient(location=":memory:")
            else:
                self._client = QdrantClient(url=url, api_key=api_key, timeout=30)
        except Exception as exc:
            raise StoreError(f"cannot connect to Qdrant at {url}: {exc}") from exc
        self._bm25: Any = None

    def _models(self) -> Any:
        from qdrant_client import models

        return models

    def exists(self) -> bool:
        try:
            return bool(self._client.collection_exists(self.collection))
        except Exception as exc:
            raise StoreError(f"Qdrant at {self.url} is not reachable: {exc}") from exc

    def prepare(self, embedding_model: str, dimension: int) -> None:
        m = self._models()
        if self.exists():
            meta = self._client.get_collection(self.collection).config.metadata or {}
            if meta.get("embedding_model") != embedding_model or meta.get("dimension") != dimension:
                raise ModelMismatchError(
                    mismatch_message(
                        f"collection '{self.collection}' at {self.url}",
                        meta,
                        embedding_model,
                        dimension,
                    )
                )
            return
        self._client.create_collection(
            self.collection,
            vectors_config={DENSE: m.VectorParams(size=dimension, distance=m.Distance.COSINE)},
            sparse_vectors_config={LEXICAL: m.SparseVectorParams(modifier=m.Modifier.IDF)},
            metadata={
                "embedding_model": embedding_model,
                "dimension": dimension,
                "schema": SCHEMA_VERSION,
            },
        )
        for field in INDEXED_FIELDS:
            schema = (
                m.KeywordIndexParams(type=m.KeywordIndexType.KEYWORD, is_tenant=True)
                if field == "tenant"
                else m.PayloadSchemaType.KEYWORD
            )
            self._client.create_payload_index(self.collection, field, field_schema=schema)

    def close(self) -> None:
        self._client.close()

    def _filter(self, tenant: str, filters: Filters | None, must_not: Filters | None = None) -> Any:
        m = self._models()

        def condition(key: str, value: Any) -> Any:
            match = m.MatchAny(any=value) if isinstance(value, list) else m.MatchValue(value=value)
            return m.FieldCondition(key=key, match=match)

        must, negated = scoped_conditions(tenant, filters, must_not)
        return m.Filter(
            must=[condition(k, v) for k, v in must],
            must_not=[condition(k, v) for k, v in negated] or None,
        )

    def upsert(self, tenant: str, points: list[StoredPoint]) -> None:
        if not points:
            return
        m = self._models()
        if self._bm25 is None:
            self._bm25 = lexical_embedder()
        structs = []
        for point in points:
            sparse = self._bm25.embed_document(point.text)
            vector = {
                DENSE: point.vector,
                LEXICAL: m.SparseVector(indices=list(sparse.indices), values=list(sparse.values)),
            }
            payload = {**point.payload, "tenant": tenant}
            structs.append(m.PointStruct(id=point.id, vector=vector, payload=payload))
        try:
            self._client.upsert(self.collection, points=structs, wait=True)
        except Exception as exc:
            raise StoreError(f"writing {len(structs)} points to {self.url} failed: {exc}") from exc

    def delete_document(
        self, tenant: str, document_id: str, *, keep_version: str | None = None
    ) -> None:
        if not self.exists():
            return
        m = self._models()
        keep = {"version": keep_version} if keep_version else None
        selector = self._filter(tenant, {"document_id": document_id}, must_not=keep)
        self._client.delete(self.collection, points_selector=m.FilterSelector(filter=selector))

    def search(
        self, tenant: str, vector: list[float], limit: int, filters: Filters | None = None
    ) -> list[Hit]:
        if not self.exists():
            return []
        response = self._client.query_points(
            self.collection,
            query=vector,
            using=DENSE,
            limit=limit,
            query_filter=self._filter(tenant, filters),
            with_payload=True,
        )
        return [
            Hit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {}))
            for p in response.points
        ]

    def count(self, tenant: str, filters: Filters | None = None) -> int:
        if not self.exists():
            return 0
        return int(
            self._client.count(
                self.collection, count_filter=self._filter(tenant, filters), exact=True
            ).count
        )

    def scroll(self, tenant: str, filters: Filters | None = None, limit: int = 10_000) -> list[Hit]:
        if not self.exists():
            return []
        records, _ = self._client.scroll(
            self.collection,
            scroll_filter=self._filter(tenant, filters),
            limit=limit,
            with_payload=True,
        )
        return [Hit(id=str(r.id), score=0.0, payload=dict(r.payload or {})) for r in records]
