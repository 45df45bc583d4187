"""A deterministic embedder for tests: hashed words, no model, no network.

``HashEmbedder`` satisfies ``flexmatch.engine.embedders.Embedder`` (``name``,
``dimension``, ``embed``), so it goes wherever a real model does
(``KnowledgeBase.open(folder, embedder=HashEmbedder())``). It loads nothing and embeds
thousands of texts a second, so a test that checks what FlexMatch does with vectors, not
how good they are, needs no model. Texts that share words get similar vectors, enough for
"the document about harbours comes back for a question about the harbour"; it knows
nothing of synonyms or word order. Standard library only.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading

__all__ = ["HashEmbedder", "hash_vector"]

_WORD = re.compile(r"\w+")


def hash_vector(text: str, dimension: int) -> list[float]:
    """``text`` as a unit vector of ``dimension`` floats: each word (Unicode, case-folded)
    hashed to a coordinate and a sign (the hashing trick), the counts L2-normalised.

    A text with no word at all maps to the first axis, so cosine similarity stays defined
    (a zero vector has no direction and stores refuse or mis-score it)."""
    vector = [0.0] * dimension
    for word in _WORD.findall(text.casefold()):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        coordinate = int.from_bytes(digest[:4], "little") % dimension
        vector[coordinate] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0.0:
        vector[0] = 1.0
        return vector
    return [value / norm for value in vector]


class HashEmbedder:
    """An ``Embedder`` whose vector for a text depends on that text only: the same on
    every run, machine and process, in any batch. It counts its calls and texts, so a test
    can check what was (not) embedded, e.g. that an unchanged document is not embedded
    again.

    ``name`` is what the store records as the collection's embedding model; two embedders
    of different ``dimension`` have different names, so a store built with one refuses
    the other as a real model mismatch would be refused."""

    def __init__(self, dimension: int = 256, name: str | None = None) -> None:
        if dimension < 2:
            raise ValueError(f"HashEmbedder dimension must be at least 2, got {dimension}")
        self._dimension = dimension
        self.name = name or f"testing/hash-{dimension}"
        self.calls = 0  # embed() calls with at least one text
        self.texts = 0  # texts embedded, over all calls
        self._lock = threading.Lock()  # ingest embeds from several threads at once

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text, in order."""
        if texts:
            with self._lock:
                self.calls += 1
                self.texts += len(texts)
        return [hash_vector(text, self._dimension) for text in texts]

    def __repr__(self) -> str:
        return f"HashEmbedder(dimension={self._dimension}, name={self.name!r})"
