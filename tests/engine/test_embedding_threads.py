"""Threads set for the machine: a query runs on its caller's thread, a batch's runs on
every core at once, each run on one thread."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import numpy as np
import pytest

from flexmatch.config import LOCAL_EMBEDDING_MODEL_FP32, LOCAL_EMBEDDING_MODEL_INT8, ModelsConfig
from flexmatch.engine.embedders import OnnxEmbedder, make_embedder
from flexmatch.engine.embedders.threads import BULK_NICENESS, bulk_threads


class _Watched:
    """The embedder's session, noting the thread each run ran on."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.threads: list[int] = []

        self.niceness: list[int] = []

    def run(self, *args: Any) -> Any:
        self.threads.append(threading.get_ident())
        if sys.platform == "linux":
            self.niceness.append(_niceness())
        return self.session.run(*args)


def _niceness() -> int:
    """This thread's nice value (Linux schedules threads one by one)."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def _watch(embedder: OnnxEmbedder) -> _Watched:
    watched = _Watched(embedder._load())
    embedder._session = watched
    return watched


@pytest.mark.parametrize("model", [LOCAL_EMBEDDING_MODEL_FP32, LOCAL_EMBEDDING_MODEL_INT8])
def test_a_query_runs_on_its_thread_and_a_batch_on_every_core(model: str) -> None:
    """Sized in tokens: a query's five variants stay on the caller's thread; 32 questions
    are a batch whose runs spread over every core, each run on one thread; the vectors
    are the same either way."""
    embedder = OnnxEmbedder(model)
    watched = _watch(embedder)
    texts = [f"where is harbour number {n} of the old town?" for n in range(32)]
    one = np.asarray(embedder.embed(texts[:1]))
    embedder.embed(texts[:5])
    assert set(watched.threads) == {threading.get_ident()}
    watched.threads.clear()
    batch = np.asarray(embedder.embed(texts))
    if bulk_threads() > 1:
        assert threading.get_ident() not in watched.threads
        assert len(set(watched.threads)) == bulk_threads()
    assert embedder._session.session.get_session_options().intra_op_num_threads == 1
    assert float((one[0] * batch[0]).sum()) > 0.99999


def test_int8_vectors_do_not_depend_on_the_texts_beside_them() -> None:
    """int8 quantizes activations with one scale a run, so each text runs alone: its
    vector is the same in any batch, as the fp32 model's is."""
    embedder = OnnxEmbedder(LOCAL_EMBEDDING_MODEL_INT8)
    short = "Where is the harbour?"
    long = "The harbour of the old town kept its ships behind a long stone wall. " * 12
    alone = np.asarray(embedder.embed([short])[0])
    for company in ([short, long], [long, "x", short, long[:200]], [short] * 40):
        beside = np.asarray(embedder.embed(company)[company.index(short)])
        assert np.array_equal(alone, beside)


def test_a_configured_thread_count_is_used_for_everything() -> None:
    embedder = make_embedder(ModelsConfig(embedding_threads=3))
    assert isinstance(embedder, OnnxEmbedder)
    watched = _watch(embedder)
    embedder.embed(["one"] * 3)
    assert threading.get_ident() not in watched.threads  # even a query uses the workers
    watched.threads.clear()
    embedder.embed(["many"] * OnnxEmbedder.BULK)  # BULK tokens and more
    assert len(set(watched.threads)) == 3 and threading.get_ident() not in watched.threads
    assert make_embedder(ModelsConfig()).threads is None  # unset: chosen per call


def _can_lower_a_thread() -> bool:
    """Whether this system lets a thread lower its own priority (a sandbox may not)."""
    allowed: list[bool] = []

    def probe() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _niceness() + 1)
            allowed.append(True)
        except OSError:
            allowed.append(False)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return allowed == [True]


@pytest.mark.skipif(sys.platform != "linux", reason="threads have priorities of their own on Linux")
def test_a_batch_runs_below_its_process_and_leaves_the_caller_as_it_was() -> None:
    """A bulk embedding yields the cores to the event loop and to queries; where a thread
    may not lower itself (a sandbox), its runs stay at the process's level."""
    process = os.getpriority(os.PRIO_PROCESS, os.getpid())
    expected = min(19, process + BULK_NICENESS) if _can_lower_a_thread() else process
    caller = _niceness()
    embedder = OnnxEmbedder(LOCAL_EMBEDDING_MODEL_INT8, threads=2)
    watched = _watch(embedder)
    embedder.embed([f"where is harbour number {n}?" for n in range(8)])
    assert watched.niceness and set(watched.niceness) == {expected}
    assert _niceness() == caller
