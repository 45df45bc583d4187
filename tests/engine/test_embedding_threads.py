"""Thread counts set for the machine: one thread for a query, every core for a batch."""

from __future__ import annotations

import numpy as np

from flexmatch.config import ModelsConfig
from flexmatch.engine.embeddings import OnnxEmbedder, bulk_threads, make_embedder


def _threads(embedder: OnnxEmbedder) -> dict[int, int]:
    return {
        count: session.get_session_options().intra_op_num_threads
        for count, session in embedder._sessions.items()
    }


def test_a_query_runs_on_one_thread_and_a_batch_on_every_core() -> None:
    """Sized in tokens: a query's five variants stay on one thread; 32 questions, or one
    passage of ~200 tokens on its own (an ingest embeds a chunk's text early), are a batch."""
    embedder = OnnxEmbedder()
    texts = [f"where is harbour number {n}?" for n in range(32)]  # 8 tokens each
    one = np.asarray(embedder.embed(texts[:1]))
    embedder.embed(texts[:5])
    assert _threads(embedder) == {1: 1}
    batch = np.asarray(embedder.embed(texts))
    assert _threads(embedder) == {1: 1, bulk_threads(): bulk_threads()}  # one on 1 core
    assert float((one[0] * batch[0]).sum()) > 0.99999  # the same vectors either way

    passage = OnnxEmbedder()
    passage.embed(["The harbour of the old town kept its ships behind a long wall. " * 15])
    assert _threads(passage) == {bulk_threads(): bulk_threads()}


def test_a_configured_thread_count_is_used_for_everything() -> None:
    embedder = make_embedder(ModelsConfig(embedding_threads=3))
    assert isinstance(embedder, OnnxEmbedder)
    embedder.embed(["one"])
    embedder.embed(["many"] * OnnxEmbedder.BULK)  # BULK tokens and more
    assert list(embedder._sessions) == [3]
    assert make_embedder(ModelsConfig()).threads is None  # unset: chosen per call
