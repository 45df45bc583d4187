"""The packaged model on torch, through sentence-transformers: a reference for tests and
benchmarks, never the served model."""

from __future__ import annotations

import threading
from typing import Any

from flexmatch.config import LOCAL_EMBEDDING_MODEL_FP32
from flexmatch.engine.embedders.base import packaged_model_dir, quiet_transformers
from flexmatch.errors import EmbeddingError, MissingExtraError
from flexmatch.extras import require


class LocalEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers (torch): the reference the ONNX
    export is checked against."""

    def __init__(self, name: str = LOCAL_EMBEDDING_MODEL_FP32, batch_size: int = 64) -> None:
        self.name = name
        self.batch_size = batch_size
        self._model: Any = None
        # torch already uses every core; concurrent encode calls only thrash them
        self._lock = threading.RLock()

    def _load(self) -> Any:
        with self._lock:  # two first calls at once must not load the model twice
            return self._load_unlocked()

    def _load_unlocked(self) -> Any:
        if self._model is None:
            purpose = "the packaged embedding model"
            try:
                folder = packaged_model_dir()
                st = require("sentence_transformers", "local", purpose)
                with quiet_transformers(purpose):
                    self._model = st.SentenceTransformer(
                        str(folder), device="cpu", local_files_only=True
                    )
            except (EmbeddingError, MissingExtraError):
                raise
            except Exception as exc:
                raise EmbeddingError(f"could not load {self.name}: {exc}") from exc
        return self._model

    @property
    def dimension(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None)
        return int((getter or model.get_sentence_embedding_dimension)())

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        vectors: list[list[float]] = [[] for _ in texts]
        with self._lock:
            for group in _length_groups(texts, self.batch_size):
                encoded = model.encode(
                    [texts[i] for i in group],
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                for index, row in zip(group, encoded, strict=True):
                    vectors[index] = row.tolist()
        return vectors


def _length_groups(texts: list[str], batch_size: int) -> list[list[int]]:
    """Indices of ``texts`` in groups of similar length.

    A batch is padded to its longest text, so one chunk-length text among short
    questions would make every question cost as much as the chunk.
    """
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    groups: list[list[int]] = []
    for index in order:
        if groups:
            group = groups[-1]
            shortest = len(texts[group[0]])
            if len(group) < batch_size and len(texts[index]) <= 2 * shortest + 40:
                group.append(index)
                continue
        groups.append([index])
    return groups
