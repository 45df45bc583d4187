"""The same contract for both stores: embedded qdrant-edge and qdrant-client (server API,
exercised with its in-process ``:memory:`` engine), and for ``flexmatch.testing``'s
``InMemoryStore`` that plug-in tests use."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexmatch.engine.stores.base import Search, StoredPoint, VectorStore
from flexmatch.engine.stores.edge import EdgeStore
from flexmatch.engine.stores.server import ServerStore
from flexmatch.errors import ModelMismatchError, StoreError
from flexmatch.testing import InMemoryStore

DIM = 4


def _unit(*values: float) -> list[float]:
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


def _point(
    pid: int, vector: list[float], document: str, version: str = "v1", **extra
) -> StoredPoint:
    payload = {
        "document_id": document,
        "chunk_id": f"{document}#0",
        "source": "default",
        "version": version,
        "matched_text": f"text {pid}",
        **extra,
    }
    return StoredPoint(
        id=f"00000000-0000-0000-0000-{pid:012d}",
        vector=vector,
        text=f"text {pid}",
        payload=payload,
    )


@pytest.fixture(params=["edge", "server", "testing"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    made: VectorStore
    if request.param == "edge":
        made = EdgeStore(tmp_path / "qdrant")
    elif request.param == "server":
        made = ServerStore(":memory:", None, "test")
    else:
        made = InMemoryStore("test")
    made.prepare("test-model", DIM)
    yield made
    made.close()


def test_search_is_scoped_to_the_tenant(store: VectorStore) -> None:
    store.upsert("a", [_point(1, _unit(1, 0, 0, 0), "doc-a")])
    store.upsert("b", [_point(2, _unit(1, 0.1, 0, 0), "doc-b")])
    hits = store.search("a", _unit(1, 0, 0, 0), 10)
    assert [h.payload["document_id"] for h in hits] == ["doc-a"]
    assert hits[0].payload["tenant"] == "a" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert store.count("a") == 1 and store.count("b") == 1 and store.count("c") == 0


def test_tenant_payload_cannot_be_forged(store: VectorStore) -> None:
    store.upsert("a", [_point(1, _unit(1, 0, 0, 0), "doc", tenant="b")])
    assert store.count("b") == 0 and store.count("a") == 1


def test_filters_and_ranking(store: VectorStore) -> None:
    store.upsert(
        "t",
        [
            _point(1, _unit(1, 0, 0, 0), "d1"),
            _point(2, _unit(0.9, 0.4, 0, 0), "d2", source="web"),
            _point(3, _unit(0, 1, 0, 0), "d3"),
        ],
    )
    hits = store.search("t", _unit(1, 0, 0, 0), 3)
    assert [h.payload["document_id"] for h in hits] == ["d1", "d2", "d3"]
    only_web = store.search("t", _unit(1, 0, 0, 0), 3, {"source": "web"})
    assert [h.payload["document_id"] for h in only_web] == ["d2"]
    some = store.search("t", _unit(1, 0, 0, 0), 3, {"document_id": ["d3", "d2"]})
    assert [h.payload["document_id"] for h in some] == ["d2", "d3"]


def test_replace_keeps_only_the_new_version(store: VectorStore) -> None:
    store.upsert(
        "t",
        [_point(1, _unit(1, 0, 0, 0), "doc", "old"), _point(2, _unit(0, 1, 0, 0), "doc", "old")],
    )
    store.upsert("t", [_point(3, _unit(0, 0, 1, 0), "doc", "new")])
    store.delete("t", {"document_id": "doc"}, must_not={"version": "new"})
    hits = store.search("t", _unit(1, 1, 1, 0), 10)
    assert [h.payload["version"] for h in hits] == ["new"]


def test_delete_in_one_tenant_leaves_the_other(store: VectorStore) -> None:
    store.upsert("a", [_point(1, _unit(1, 0, 0, 0), "doc")])
    store.upsert("b", [_point(2, _unit(1, 0, 0, 0), "doc")])
    store.delete("a", {"document_id": "doc"})
    assert store.count("a") == 0 and store.count("b") == 1


def test_another_embedding_model_is_refused(store: VectorStore) -> None:
    with pytest.raises(ModelMismatchError, match=r"test-model.*4 dimensions.*other-model"):
        store.prepare("other-model", 8)
    store.prepare("test-model", DIM)  # the right one is fine


def test_edge_store_persists_and_refuses_a_second_open(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path / "q")
    first.prepare("m", DIM)
    first.upsert("t", [_point(1, _unit(1, 0, 0, 0), "doc")])
    second = EdgeStore(tmp_path / "q")
    with pytest.raises(StoreError, match="in use by another FlexMatch process"):
        second.count("t")
    first.close()
    assert second.count("t") == 1
    second.close()


def test_empty_edge_store_answers_without_creating_anything(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "none")
    assert store.search("t", _unit(1, 0, 0, 0), 5) == [] and store.count("t") == 0
    assert not (tmp_path / "none").exists()


def test_scroll_lists_a_tenants_points(store: VectorStore) -> None:
    store.upsert("a", [_point(1, _unit(1, 0, 0, 0), "d1"), _point(2, _unit(0, 1, 0, 0), "d2")])
    store.upsert("b", [_point(3, _unit(1, 0, 0, 0), "d3")])
    assert sorted(h.payload["document_id"] for h in store.scroll("a")) == ["d1", "d2"]
    assert [h.payload["document_id"] for h in store.scroll("a", {"document_id": "d2"})] == ["d2"]


def test_retrieve_by_id_never_crosses_tenants(store: VectorStore) -> None:
    point = _point(7, _unit(1, 0, 0, 0), "doc")
    store.upsert("a", [point])
    assert [h.payload["document_id"] for h in store.retrieve("a", [point.id])] == ["doc"]
    assert store.retrieve("b", [point.id]) == []


def test_points_without_vectors_are_never_search_hits(store: VectorStore) -> None:
    record = StoredPoint(id="00000000-0000-0000-0000-0000000000aa", payload={"record": "document"})
    store.upsert("t", [record, _point(1, _unit(1, 0, 0, 0), "doc")])
    assert [h.payload.get("record") for h in store.search("t", _unit(1, 0, 0, 0), 10)] == [None]
    assert store.count("t", {"record": "document"}) == 1


def test_lexical_search_ranks_by_bm25(store: VectorStore) -> None:
    texts = {
        1: "The harbour master collects mooring fees every morning.",
        2: "Apples and pears grow in the orchard on the hill.",
        3: "Fees for the orchard tours are paid at the gate.",
    }
    store.upsert(
        "t",
        [
            StoredPoint(
                id=f"00000000-0000-0000-0000-{i:012d}",
                vector=_unit(1, 0, 0, 0),
                text=text,
                payload={"document_id": f"d{i}"},
            )
            for i, text in texts.items()
        ],
    )
    hits = store.search_lexical("t", "mooring fees harbour", 3)
    assert [h.payload["document_id"] for h in hits][:2] == ["d1", "d3"]
    assert store.search_lexical("other", "mooring fees", 3) == []
    assert store.search_lexical("t", "the and of", 3) == []  # only stopwords


def test_search_batch_answers_each_search_in_order(store: VectorStore) -> None:
    from flexmatch.engine.stores import Search

    store.upsert(
        "t",
        [
            _point(1, _unit(1, 0, 0, 0), "a", match_kind="content"),
            _point(2, _unit(0, 1, 0, 0), "b", match_kind="question"),
        ],
    )
    store.upsert("u", [_point(3, _unit(1, 0, 0, 0), "c")])
    dense_a, dense_b, kinds, lexical, stopwords, bare = store.search_batch(
        "t",
        [
            Search(1, vector=_unit(1, 0.1, 0, 0)),
            Search(1, vector=_unit(0.1, 1, 0, 0), fields=("document_id",)),
            Search(5, vector=_unit(1, 1, 0, 0), filters={"match_kind": "question"}),
            Search(5, text="text 2"),
            Search(5, text="the of and"),  # only stopwords: no search, no hits
            Search(1, vector=_unit(0.1, 1, 0, 0), fields=()),  # ids and scores only
        ],
    )
    assert [h.payload["document_id"] for h in dense_a] == ["a"]
    assert [h.payload["document_id"] for h in dense_b] == ["b"]
    assert set(dense_b[0].payload) == {"document_id", "tenant"}  # only what was asked
    assert [h.payload["document_id"] for h in kinds] == ["b"]
    assert lexical and lexical[0].payload["document_id"] == "b"
    assert stopwords == []
    assert [(h.id, h.payload) for h in bare] == [(dense_b[0].id, {})] and bare[0].score > 0.9


def test_edge_store_builds_its_search_index_past_the_threshold(tmp_path: Path) -> None:
    """``optimize`` builds HNSW (only past ``min_points``) and search finds the same
    nearest points afterwards."""
    import random

    rng = random.Random(7)
    store = EdgeStore(tmp_path / "qdrant", indexing_threshold_kb=1)
    store.prepare("test-model", DIM)
    vectors = [_unit(*(rng.gauss(0, 1) for _ in range(DIM))) for _ in range(400)]
    store.upsert("t", [_point(i, v, f"d{i}") for i, v in enumerate(vectors)])
    exact = [store.search("t", v, 1)[0].id for v in vectors[:20]]
    assert store.optimize(min_points=10_000) is False  # too small: left to exact search
    indexed = store._open().info().indexed_vectors_count  # the sparse (BM25) vectors
    assert indexed == len(vectors)
    assert store.optimize(min_points=100) is True
    assert store._open().info().indexed_vectors_count == 2 * len(vectors)  # and now dense
    assert [store.search("t", v, 1)[0].id for v in vectors[:20]] == exact
    store.close()


def test_threads_may_write_and_search_at_once(store: VectorStore) -> None:
    """A query's source groups search in threads while an ingest writes: both stores
    must answer (qdrant-client's in-process engine alone is not thread-safe)."""
    failures: list[str] = []

    def work(thread: int) -> None:
        for i in range(60):
            pid = thread * 1000 + i
            vector = _unit(*(float((pid * (k + 3)) % 7 + 1) for k in range(DIM)))
            try:
                store.upsert("t", [_point(pid, vector, f"doc{thread}")])
                store.search_batch("t", [Search(5, vector=vector), Search(5, text="text")])
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(store.search_batch("t", [Search(300, text="text")])[0]) == 240
