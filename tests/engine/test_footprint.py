"""An ingest's memory follows the documents in flight, not the size of the run; the
store keeps its dense vectors in float16, and a float32 store made before still opens
and answers the same."""

from __future__ import annotations

import asyncio
import json
import shutil
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flexmatch import KnowledgeBase
from flexmatch.engine.documents import ActiveRuns
from flexmatch.engine.ingest.run import IngestRun
from flexmatch.engine.stores.base import DENSE, LEXICAL, StoredPoint
from flexmatch.engine.stores.edge import EdgeStore
from flexmatch.models import Document, Element, IngestReport
from flexmatch.testing.embedder import HashEmbedder, hash_vector
from tests.conftest import write_config


class _Registry:
    """What a run asks of the registry when nothing is stored."""

    store: Any = None

    def repair(self, tenant: str) -> int:
        return 0


def _document(name: str, text: str) -> Document:
    element = Element(kind="paragraph", text=text)
    return Document(id=name, source="default", uri=name, title=name, elements=[element])


def _documents(count: int, size: int) -> Iterator[Document]:
    for i in range(count):
        yield _document(f"d{i}", "x" * size)


def _held_at_most(documents: Iterator[Document], budget: int) -> int:
    """The most text (characters) a run had in flight at once."""
    held = 0
    most = 0

    async def index(document: Document) -> None:
        nonlocal held, most
        held += len(document.text)
        most = max(most, held)
        await asyncio.sleep(0.001)
        held -= len(document.text)

    run = IngestRun(
        report=IngestReport(),
        index=index,
        registry=_Registry(),  # type: ignore[arg-type]
        llm=None,
        concurrency=64,
        tenant="default",
        active=ActiveRuns(),
        text_in_flight=budget,
    )
    asyncio.run(run.run(documents))
    return most


def test_a_run_holds_at_most_its_text_budget_in_flight() -> None:
    # 64 documents may be in flight, but only 3,000 characters of text between them
    assert _held_at_most(_documents(30, 1_000), 3_000) == 3_000
    # a document larger than the budget is indexed alone
    big = [*_documents(2, 1_000), _document("big", "y" * 9_000)]
    assert _held_at_most(iter(big), 3_000) == 9_000


def _peak_of_ingest(tmp_path: Path, name: str, count: int) -> int:
    docs = tmp_path / f"docs-{name}"
    docs.mkdir()
    for i in range(count):
        sentences = " ".join(f"Sentence {j} of note {i} says word{i}x{j}." for j in range(600))
        (docs / f"note{i}.txt").write_text(sentences, encoding="utf-8")
    kb_dir = tmp_path / f"kb-{name}"
    write_config(kb_dir, "ingest:\n  text_in_flight: 60000\n")
    with KnowledgeBase.open(kb_dir, embedder=HashEmbedder(64), env={}) as kb:
        kb.ingest([docs])  # the store made and opened: its own buffers not counted below
        for i in range(count):
            (docs / f"note{i}.txt").write_text(
                (docs / f"note{i}.txt").read_text(encoding="utf-8") + " Changed.", "utf-8"
            )
        tracemalloc.start()
        try:
            report = kb.ingest([docs])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert report.changed == count
    return peak


def test_an_ingests_peak_memory_does_not_grow_with_the_run(tmp_path: Path) -> None:
    """Three times the documents (of ~25,000 characters each) with 60,000 characters in
    flight: the peak is about the same, where 64 documents in flight made it ~3x."""
    small = _peak_of_ingest(tmp_path, "small", 4)
    large = _peak_of_ingest(tmp_path, "large", 12)
    assert large < 1.6 * small, (small, large)


def _points(texts: list[str]) -> list[StoredPoint]:
    return [
        StoredPoint(
            id=f"00000000-0000-0000-0000-{i:012d}",
            vector=hash_vector(text, 64),
            text=text,
            payload={"record": "match", "document_id": f"d{i}", "matched_text": text},
        )
        for i, text in enumerate(texts)
    ]


WORDS = [f"w{i}" for i in range(50)]
TEXTS = [" ".join(WORDS[(i * k) % 50] for k in (1, 3, 7, 11, 13)) for i in range(120)]


def _answers(store: EdgeStore) -> list[list[tuple[str, float]]]:
    queries = ["w1 w3", "w7 w11 w13", "w2", "w40 w41 w5"]
    return [[(h.id, h.score) for h in store.search("t", hash_vector(q, 64), 10)] for q in queries]


def _same_ranking(one: list[list[tuple[str, float]]], other: list[list[tuple[str, float]]]) -> None:
    """The same scores rank by rank (float16 keeps ~3 digits), and each point found by both
    scored alike: the rankings differ at most among ties."""
    for first, second in zip(one, other, strict=True):
        assert [round(s, 2) for _, s in first] == [round(s, 2) for _, s in second]
        scores = dict(second)
        assert all(abs(s - scores[i]) < 2e-3 for i, s in first if i in scores)


def test_a_new_store_keeps_float16_vectors_and_an_old_float32_one_still_opens(
    tmp_path: Path,
) -> None:
    import qdrant_edge as edge

    new = EdgeStore(tmp_path / "new")
    new.prepare("testing/hash-64", 64)
    new.upsert("t", _points(TEXTS))
    config = json.loads((tmp_path / "new" / "shard" / "edge_config.json").read_text())
    assert config["vectors"][DENSE]["datatype"].lower() == "float16"
    # a store as versions before this one made it: float32 vectors
    old = EdgeStore(tmp_path / "old")
    old.prepare("testing/hash-64", 64)
    old.close()
    shutil.rmtree(tmp_path / "old" / "shard")
    shard = edge.EdgeShard.create(
        str(tmp_path / "old" / "shard"),
        edge.EdgeConfig(
            vectors={DENSE: edge.EdgeVectorParams(size=64, distance=edge.Distance.Cosine)},
            sparse_vectors={LEXICAL: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
        ),
    )
    shard.close()
    old = EdgeStore(tmp_path / "old")
    old.prepare("testing/hash-64", 64)
    old.upsert("t", _points(TEXTS))
    _same_ranking(_answers(new), _answers(old))
    answers = _answers(old)
    new.close()
    old.close()
    reopened = EdgeStore(tmp_path / "old")
    assert _answers(reopened) == answers  # float32 as it was
    reopened.close()
