"""A Qdrant server or cluster through qdrant-client (``store.url``), for data that outgrows
one machine. ``url: ":memory:"`` runs qdrant-client's in-process engine, which speaks the
same API and is what the tests use.

Every tenant shares one collection, laid out as Qdrant's multitenancy guide recommends:
the ``tenant`` field is a keyword index with ``is_tenant`` (the server stores each
tenant's points together), and the HNSW graph is built per tenant (``payload_m=16``)
instead of over the whole collection (``m=0``), since every query FlexMatch sends filters
on the tenant. The cluster settings (shards, replicas, write consistency, what lives on
disk) are applied when the collection is created; an existing collection keeps its own.
"""

from __future__ import annotations

import contextlib
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from flexmatch.access import ACCESS_FIELD
from flexmatch.engine.stores.base import (
    DENSE,
    INDEXED_FIELDS,
    LEXICAL,
    SCHEMA_VERSION,
    Filters,
    Hit,
    QueryMethods,
    Scope,
    StoredPoint,
    check_payload,
    check_points,
    in_tenant,
    lexical_document,
    mismatch_message,
    scoped_conditions,
)
from flexmatch.errors import ModelMismatchError, StoreError
from flexmatch.extras import require


def _models() -> Any:
    return require("qdrant_client.models", "qdrant", "a Qdrant server store (store.url)")


# the HNSW graph per tenant and none over the whole collection (the multitenancy guide's
# "calibrate performance"): FlexMatch never searches across tenants
PER_TENANT_LINKS = 16


@dataclass(frozen=True)
class ClusterSettings:
    """How the collection is spread and stored; None leaves the choice to the server."""

    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None
    on_disk_payload: bool | None = None
    on_disk_vectors: bool | None = None


class ServerStore(QueryMethods):
    """One collection on a Qdrant server; tenants share it, filtered on every call."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        collection: str,
        cluster: ClusterSettings | None = None,
    ) -> None:
        QdrantClient = require("qdrant_client", "qdrant", "a Qdrant server store").QdrantClient
        self.url = url
        self.collection = collection
        self.cluster = cluster or ClusterSettings()
        # qdrant-client's in-process engine is not thread-safe (concurrent searches and
        # writes fail with index errors); a server is, through its HTTP client
        self._serial: AbstractContextManager[Any] = (
            threading.RLock() if url == ":memory:" else contextlib.nullcontext()
        )
        try:
            if url == ":memory:":
                self._client = QdrantClient(location=":memory:")
            else:
                self._client = QdrantClient(url=url, api_key=api_key, timeout=30)
        except Exception as exc:
            raise StoreError(f"cannot connect to Qdrant at {url}: {exc}") from exc

    def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            with self._serial:
                return getattr(self._client, method)(*args, **kwargs)
        except Exception as exc:
            raise StoreError(f"{what} on Qdrant at {self.url} failed: {exc}") from exc

    def exists(self) -> bool:
        return bool(self._call("checking the collection", "collection_exists", self.collection))

    def check(self) -> None:
        self.exists()  # a round trip to the server: one that does not answer raises

    def _meta(self) -> dict[str, Any]:
        info = self._call("reading the collection", "get_collection", self.collection)
        return dict(info.config.metadata or {})

    def recorded_model(self) -> str | None:
        return self._meta().get("embedding_model") if self.exists() else None

    def prepare(self, embedding_model: str, dimension: int) -> None:
        if self.exists():
            meta = self._meta()
            if meta.get("embedding_model") != embedding_model or meta.get("dimension") != dimension:
                where = f"collection '{self.collection}' at {self.url}"
                raise ModelMismatchError(mismatch_message(where, meta, embedding_model, dimension))
            return
        self._call(
            "creating the collection",
            "create_collection",
            self.collection,
            **self.collection_settings(embedding_model, dimension),
        )
        for field in INDEXED_FIELDS:
            self._call(
                "indexing a field",
                "create_payload_index",
                self.collection,
                field,
                field_schema=self.index_schema(field),
            )

    def collection_settings(self, embedding_model: str, dimension: int) -> dict[str, Any]:
        """What ``create_collection`` is sent: the vectors, the tenant layout and the
        cluster settings that are set (unset ones are left out, for the server to choose)."""
        m = _models()
        cluster = self.cluster
        on_disk = cluster.on_disk_vectors
        settings: dict[str, Any] = {
            "vectors_config": {
                DENSE: m.VectorParams(size=dimension, distance=m.Distance.COSINE, on_disk=on_disk)
            },
            "sparse_vectors_config": {
                LEXICAL: m.SparseVectorParams(
                    modifier=m.Modifier.IDF,
                    index=m.SparseIndexParams(on_disk=on_disk) if on_disk is not None else None,
                )
            },
            "hnsw_config": m.HnswConfigDiff(m=0, payload_m=PER_TENANT_LINKS),
            "metadata": {
                "embedding_model": embedding_model,
                "dimension": dimension,
                "schema": SCHEMA_VERSION,
            },
        }
        for name in (
            "shard_number",
            "replication_factor",
            "write_consistency_factor",
            "on_disk_payload",
        ):
            if getattr(cluster, name) is not None:
                settings[name] = getattr(cluster, name)
        return settings

    @staticmethod
    def index_schema(field: str) -> Any:
        """The tenant field is the collection's tenant key; the others are plain keywords."""
        m = _models()
        if field == "tenant":
            return m.KeywordIndexParams(type=m.KeywordIndexType.KEYWORD, is_tenant=True)
        return m.PayloadSchemaType.KEYWORD

    def close(self) -> None:
        self._client.close()

    def size_bytes(self) -> int | None:
        return None  # the server owns its disk

    def _filter(self, tenant: str, filters: Filters | None, must_not: Filters | None = None) -> Any:
        m = _models()

        def condition(key: str, value: Any) -> Any:
            match = m.MatchAny(any=value) if isinstance(value, list) else m.MatchValue(value=value)
            field = m.FieldCondition(key=key, match=match)
            if key == ACCESS_FIELD:  # any of the asker's tokens, or no access list at all
                empty = m.IsEmptyCondition(is_empty=m.PayloadField(key=ACCESS_FIELD))
                return m.Filter(should=[field, empty])
            return field

        must, negated = scoped_conditions(tenant, filters, must_not)
        return m.Filter(
            must=[condition(k, v) for k, v in must],
            must_not=[condition(k, v) for k, v in negated] or None,
        )

    def upsert(self, tenant: str, points: list[StoredPoint]) -> None:
        if not points:
            return
        check_points(points)
        m = _models()
        structs = []
        for point in points:
            vector: dict[str, Any] = {}
            if point.vector is not None:
                sparse = lexical_document(point.text)
                vector = {
                    DENSE: point.vector,
                    LEXICAL: m.SparseVector(
                        indices=list(sparse.indices), values=list(sparse.values)
                    ),
                }
            payload = {**point.payload, "tenant": tenant}
            structs.append(m.PointStruct(id=point.id, vector=vector, payload=payload))
        self._call(
            f"writing {len(structs)} points", "upsert", self.collection, points=structs, wait=True
        )

    def delete(self, tenant: str, filters: Filters, must_not: Filters | None = None) -> None:
        if not self.exists():
            return
        selector = _models().FilterSelector(filter=self._filter(tenant, filters, must_not))
        self._call(
            "deleting points", "delete", self.collection, points_selector=selector, wait=True
        )

    def _sparse(self, sparse: Any) -> Any:
        return _models().SparseVector(indices=list(sparse.indices), values=list(sparse.values))

    def _query_batch(
        self, tenant: str, queries: list[tuple[Any, str, int, Scope, list[str] | None]]
    ) -> list[list[Hit]]:
        m = _models()
        requests = [
            m.QueryRequest(
                query=query,
                using=using,
                limit=limit,
                filter=self._filter(tenant, *scope),
                with_payload=True if fields is None else (fields or False),
            )
            for query, using, limit, scope, fields in queries
        ]
        try:
            with self._serial:
                responses = self._client.query_batch_points(self.collection, requests=requests)
        except Exception as exc:
            if not self.exists():  # nothing ingested yet: nothing to find
                return [[] for _ in queries]
            raise StoreError(f"searching on Qdrant at {self.url} failed: {exc}") from exc
        return [
            [
                Hit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {}))
                for p in r.points
            ]
            for r in responses
        ]

    def optimize(self, min_points: int) -> bool:
        return False  # a Qdrant server runs its own optimizers

    def retrieve(self, tenant: str, ids: list[str]) -> list[Hit]:
        if not self.exists() or not ids:
            return []
        records = self._call("reading points", "retrieve", self.collection, ids, with_payload=True)
        return in_tenant(
            tenant, [Hit(id=str(r.id), payload=dict(r.payload or {})) for r in records]
        )

    def scroll(
        self, tenant: str, filters: Filters | None = None, limit: int = 100_000
    ) -> list[Hit]:
        if not self.exists():
            return []
        hits: list[Hit] = []
        offset: Any = None
        while len(hits) < limit:
            records, offset = self._call(
                "listing points",
                "scroll",
                self.collection,
                scroll_filter=self._filter(tenant, filters),
                limit=min(1000, limit - len(hits)),
                offset=offset,
                with_payload=True,
            )
            hits.extend(Hit(id=str(r.id), payload=dict(r.payload or {})) for r in records)
            if offset is None or not records:
                break
        return in_tenant(tenant, hits)

    def scroll_vectors(
        self,
        tenant: str,
        filters: Filters | None = None,
        limit: int = 100_000,
        fields: tuple[str, ...] | None = None,
    ) -> list[tuple[Hit, list[float]]]:
        if not self.exists():
            return []
        payload: bool | list[str] = True if fields is None else [*fields, "tenant"]
        found: list[tuple[Hit, list[float]]] = []
        offset: Any = None
        while len(found) < limit:
            records, offset = self._call(
                "listing points",
                "scroll",
                self.collection,
                scroll_filter=self._filter(tenant, filters),
                limit=min(1000, limit - len(found)),
                offset=offset,
                with_payload=payload,
                with_vectors=[DENSE],
            )
            for r in records:
                vector = r.vector.get(DENSE) if isinstance(r.vector, dict) else None
                values = dict(r.payload or {})
                if isinstance(vector, list) and values.get("tenant") == tenant:
                    found.append((Hit(id=str(r.id), payload=values), vector))
            if offset is None or not records:
                break
        return found

    def set_payload(self, tenant: str, filters: Filters, payload: dict[str, Any]) -> None:
        check_payload(payload, "payload update")
        if ACCESS_FIELD in payload:  # a collection made before access control: index it
            schema = self.index_schema(ACCESS_FIELD)
            self._call(
                "indexing a field",
                "create_payload_index",
                self.collection,
                ACCESS_FIELD,
                field_schema=schema,
            )
        self._call(
            "updating payloads",
            "set_payload",
            self.collection,
            payload=payload,
            points=self._filter(tenant, filters),
            wait=True,
        )

    def count(self, tenant: str, filters: Filters | None = None) -> int:
        if not self.exists():
            return 0
        result = self._call(
            "counting points",
            "count",
            self.collection,
            count_filter=self._filter(tenant, filters),
            exact=True,
        )
        return int(result.count)
