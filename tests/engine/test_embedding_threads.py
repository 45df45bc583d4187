"""Thread counts set for the machine: one thread for a query, every core for a batch."""

from __future__ import annotations

import numpy as np

from flexmatch.config import ModelsConfig
from flexmatch.engine.embeddings import OnnxEmbedder, bulk_threads, make_embedder


def test_a_query_runs_on_one_thread_and_a_batch_on_every_core() -> None:
    embedder = OnnxEmbedder()
    texts = [f"where is harbour number {n}?" for n in range(OnnxEmbedder.BULK)]
    one = np.asarray(embedder.embed(texts[:1]))
    batch = np.asarray(embedder.embed(texts))
    threads = {
        count: session.get_session_options().intra_op_num_threads
        for count, session in embedder._sessions.items()
    }
    assert threads == {1: 1, bulk_threads(): bulk_threads()}  # one entry on a 1-core machine
    assert float((one[0] * batch[0]).sum()) > 0.99999  # the same vectors either way


def test_a_configured_thread_count_is_used_for_everything() -> None:
    embedder = make_embedder(ModelsConfig(embedding_threads=3))
    assert isinstance(embedder, OnnxEmbedder)
    embedder.embed(["one"])
    embedder.embed(["many"] * OnnxEmbedder.BULK)
    assert list(embedder._sessions) == [3]
    assert make_embedder(ModelsConfig()).threads is None  # unset: chosen per call
