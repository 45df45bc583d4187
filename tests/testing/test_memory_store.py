"""``InMemoryStore`` and ``memory_knowledge_base``: the store helpers of ``flexmatch.testing``
(the store's own contract runs over it in ``tests/engine/stores/test_stores.py``)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from flexmatch.engine.stores.base import StoredPoint, VectorStore
from flexmatch.errors import MissingExtraError, ModelMismatchError
from flexmatch.testing import HashEmbedder, InMemoryStore, memory_knowledge_base
from tests.conftest import write_config
from tests.engine.samples import HARBOUR, ORCHARD, match_points, write


def _point(number: int, text: str, embedder: HashEmbedder) -> StoredPoint:
    return StoredPoint(
        id=f"00000000-0000-0000-0000-{number:012d}",
        vector=embedder.embed([text])[0],
        text=text,
        payload={"document_id": f"doc-{number}", "source": "default", "matched_text": text},
    )


def test_each_store_is_its_own_and_searches_by_vector_and_words() -> None:
    embedder = HashEmbedder(64)
    first: VectorStore = InMemoryStore()
    second = InMemoryStore()
    for store in (first, second):
        store.prepare(embedder.name, embedder.dimension)
    first.upsert(
        "t",
        [
            _point(1, "The harbour opens at six", embedder),
            _point(2, "Apples are picked in September", embedder),
        ],
    )
    question = embedder.embed(["harbour opens"])[0]
    assert [h.payload["document_id"] for h in first.search("t", question, 1)] == ["doc-1"]
    lexical = first.search_lexical("t", "apples september", 1)
    assert [h.payload["document_id"] for h in lexical] == ["doc-2"]
    assert first.count("t") == 2 and first.count("other") == 0
    assert second.count("t") == 0  # nothing shared between instances
    first.close()
    second.close()


def test_the_store_refuses_another_embedder() -> None:
    store = InMemoryStore("kb")
    store.prepare(HashEmbedder(64).name, 64)
    with pytest.raises(ModelMismatchError, match=r"collection 'kb'.*testing/hash-128"):
        store.prepare(HashEmbedder(128).name, 128)


def test_creating_the_collection_warns_about_nothing() -> None:
    """qdrant-client's local engine warns that payload indexes do nothing, on every
    collection: noise in a plug-in author's test run, so the store keeps it quiet."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        InMemoryStore().prepare("m", 4)


def test_without_qdrant_client_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "qdrant_client", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"'qdrant' extra.*flexmatch\[qdrant\]"):
        InMemoryStore()


def test_importing_flexmatch_testing_loads_no_store_or_model_code() -> None:
    code = (
        "import sys, flexmatch.testing\n"
        "heavy = ('qdrant_client', 'qdrant_edge', 'onnxruntime', 'pydantic', 'litellm',"
        " 'flexmatch.engine', 'flexmatch.knowledge_base')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_a_knowledge_base_folder_runs_on_the_memory_store(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    paths = [write(docs, "harbour.md", HARBOUR), write(docs, "orchard.md", ORCHARD)]
    # the folder's own config is read: here a second source
    write_config(tmp_path / "kb", "sources:\n  default: {}\n  notes: {}\n")
    embedder = HashEmbedder()
    with memory_knowledge_base(tmp_path / "kb", embedder=embedder) as kb:
        assert kb.embedder is embedder
        report = kb.ingest(paths)
        assert report.added == 2 and embedder.calls >= 1
        (best,) = kb.query("when does the harbour open", top_n=1)
        assert "six in the morning" in best.content
        kb.ingest([write(docs, "notes.md", "Notes on the harbour crane.")], source="notes")
        assert {d.source for d in kb.list_documents()} == {"default", "notes"}
        again = embedder.texts
        assert kb.ingest(paths).unchanged == 2 and embedder.texts == again  # not re-embedded
        assert match_points(kb)
    assert not (tmp_path / "kb" / ".flexmatch" / "qdrant").exists()  # nothing on disk
    with memory_knowledge_base(tmp_path / "kb") as kb:
        assert kb.list_documents() == []  # a fresh, empty store each time
        assert isinstance(kb.embedder, HashEmbedder)
