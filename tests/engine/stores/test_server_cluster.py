"""A Qdrant server collection is created with the cluster settings from ``store:`` and
laid out for many tenants the way Qdrant's multitenancy guide recommends.

qdrant-client's in-memory engine keeps only part of what ``create_collection`` is sent
(the vector and sparse-vector parameters, the metadata); what it keeps is read back from
it, and the rest is checked on the request itself, validated by the client's own model
of the server's ``PUT /collections/{name}`` body.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from qdrant_client import models as m

from flexmatch import ConfigError, KnowledgeBase
from flexmatch.engine.stores.server import PER_TENANT_LINKS, ClusterSettings, ServerStore
from tests.conftest import write_config

CLUSTER = ClusterSettings(
    shard_number=6,
    replication_factor=3,
    write_consistency_factor=2,
    on_disk_payload=True,
    on_disk_vectors=True,
)


def test_the_request_carries_every_cluster_setting_and_the_tenant_layout() -> None:
    store = ServerStore(":memory:", None, "c", CLUSTER)
    settings = store.collection_settings("model", 4)
    # the REST body, built as qdrant-client builds it from create_collection's arguments
    settings["vectors"] = settings.pop("vectors_config")
    settings["sparse_vectors"] = settings.pop("sparse_vectors_config")
    request = m.CreateCollection(**settings)
    assert request.shard_number == 6 and request.replication_factor == 3
    assert request.write_consistency_factor == 2 and request.on_disk_payload is True
    assert isinstance(request.vectors, dict) and request.vectors["dense"].on_disk is True
    sparse = (request.sparse_vectors or {})["lexical"]
    assert sparse.index is not None and sparse.index.on_disk is True
    assert sparse.modifier == m.Modifier.IDF
    # no global graph, one per tenant: every query FlexMatch sends filters on the tenant
    assert request.hnsw_config == m.HnswConfigDiff(m=0, payload_m=PER_TENANT_LINKS)
    tenant = store.index_schema("tenant")
    assert isinstance(tenant, m.KeywordIndexParams) and tenant.is_tenant is True
    assert store.index_schema("source") == m.PayloadSchemaType.KEYWORD
    store.close()


def test_unset_settings_are_left_to_the_server() -> None:
    store = ServerStore(":memory:", None, "c")
    settings = store.collection_settings("model", 4)
    for name in ("shard_number", "replication_factor", "write_consistency_factor"):
        assert name not in settings
    assert "on_disk_payload" not in settings
    assert settings["vectors_config"]["dense"].on_disk is None
    assert settings["sparse_vectors_config"]["lexical"].index is None
    store.close()


def test_what_the_in_memory_engine_keeps_is_read_back() -> None:
    store = ServerStore(":memory:", None, "c", CLUSTER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "payload indexes have no effect in the local Qdrant"
        store.prepare("model", 4)
    info = store._client.get_collection("c")
    params = info.config.params
    assert isinstance(params.vectors, dict) and params.vectors["dense"].on_disk is True
    assert params.vectors["dense"].size == 4
    sparse = (params.sparse_vectors or {})["lexical"]
    assert sparse.index is not None and sparse.index.on_disk is True
    assert info.config.metadata == {"embedding_model": "model", "dimension": 4, "schema": 3}
    # what it drops (the README lists these): shards, replicas, write consistency, on-disk
    # payload, the HNSW settings and every payload index
    assert params.shard_number is None and params.replication_factor is None
    assert params.write_consistency_factor is None and params.on_disk_payload is None
    assert info.config.hnsw_config.m == 16 and info.config.hnsw_config.payload_m is None
    assert info.payload_schema == {}
    store.close()


def test_the_config_reaches_the_store(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "store:\n"
        "  url: ':memory:'\n"
        "  shard_number: 6\n"
        "  replication_factor: 3\n"
        "  write_consistency_factor: 2\n"
        "  on_disk_payload: true\n"
        "  on_disk_vectors: true\n",
    )
    with KnowledgeBase.open(tmp_path, env={}) as kb:
        store = kb.store
        assert isinstance(store, ServerStore) and store.cluster == CLUSTER


@pytest.mark.parametrize(
    ("store", "message"),
    [
        ("  shard_number: 2\n", "shard_number apply to a Qdrant server: set store.url"),
        ("  url: ${QDRANT_URL}\n  on_disk_payload: true\n", "on_disk_payload apply to a Qdrant"),
        (
            "  url: http://q:6333\n  replication_factor: 2\n  write_consistency_factor: 3\n",
            "write_consistency_factor (3) cannot exceed replication_factor (2)",
        ),
        ("  url: http://q:6333\n  shard_number: 0\n", "greater than or equal to 1"),
    ],
)
def test_cluster_settings_are_checked(tmp_path: Path, store: str, message: str) -> None:
    write_config(tmp_path, "store:\n" + store)
    with pytest.raises(ConfigError, match="store") as raised:
        KnowledgeBase.open(tmp_path, env={"QDRANT_URL": ""})
    assert message in str(raised.value)
