"""``HashEmbedder``: the deterministic embedder plug-in authors and the fast tests use."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys

import pytest

from flexmatch.engine.embedders import Embedder, EmbeddingBatcher
from flexmatch.testing import HashEmbedder
from flexmatch.testing.embedder import hash_vector


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_unit_length_of_the_given_dimension() -> None:
    embedder: Embedder = HashEmbedder(dimension=32)  # on the real protocol
    vectors = embedder.embed(["The harbour opens at dawn.", "x", "", "!!! ???"])
    assert embedder.dimension == 32 and [len(v) for v in vectors] == [32] * 4
    for vector in vectors:
        assert math.sqrt(sum(v * v for v in vector)) == pytest.approx(1.0)
    # no word at all: the first axis, never a zero vector a store would mis-score
    assert vectors[2] == vectors[3] == [1.0] + [0.0] * 31


def test_a_text_gets_the_same_vector_in_any_batch_or_instance() -> None:
    texts = ["harbour fees", "orchard apples", "harbour fees"]
    one = HashEmbedder().embed(texts)
    alone = [HashEmbedder().embed([text])[0] for text in texts]
    assert one == alone and one[0] == one[2]


def test_vectors_are_the_same_in_every_process() -> None:
    """Pinned across interpreters with different hash seeds: the vectors come from
    blake2b, never from ``hash()``, which Python salts per process."""
    code = (
        "from flexmatch.testing.embedder import hash_vector\nprint(hash_vector('Harbour fees', 8))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert outputs == {str(hash_vector("Harbour fees", 8))}


def test_shared_words_make_similar_vectors() -> None:
    embedder = HashEmbedder()
    question, harbour, orchard = embedder.embed(
        [
            "When does the harbour open?",
            "The harbour opens at dawn; fees are paid at the harbour office.",
            "Apples ripen in September in the orchard on the hill.",
        ]
    )
    assert _cosine(question, harbour) > _cosine(question, orchard) + 0.1


def test_words_are_unicode_and_case_folded() -> None:
    assert hash_vector("CAFÉ Straße", 64) == hash_vector("café STRASSE", 64)
    assert hash_vector("港口", 64) != hash_vector("果园", 64)  # not every non-ASCII text alike


def test_the_name_tells_dimensions_apart_and_can_be_chosen() -> None:
    assert HashEmbedder(64).name != HashEmbedder(128).name
    assert HashEmbedder(64, name="my-model").name == "my-model"
    with pytest.raises(ValueError, match="at least 2, got 1"):
        HashEmbedder(1)


def test_it_counts_calls_and_texts_through_the_batcher() -> None:
    """Two documents' texts reach the embedder as one batch, as with a real model."""
    embedder = HashEmbedder()
    batcher = EmbeddingBatcher(embedder, size=64)

    async def both() -> list[list[list[float]]]:
        return await asyncio.gather(batcher.embed(["a b", "c"]), batcher.embed(["d"]))

    first, second = asyncio.run(both())
    assert (embedder.calls, embedder.texts) == (1, 3)
    embedder.embed([])  # nothing to embed is not a call
    assert (embedder.calls, embedder.texts) == (1, 3)
    assert first == embedder.embed(["a b", "c"]) and second == embedder.embed(["d"])
