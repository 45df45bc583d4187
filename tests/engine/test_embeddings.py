from __future__ import annotations

import numpy as np
import pytest

from flexmatch.config import ModelsConfig
from flexmatch.engine.embeddings import (
    LiteLLMEmbedder,
    LocalEmbedder,
    _length_groups,
    make_embedder,
)
from flexmatch.errors import EmbeddingError


def test_local_model_is_offline_minilm(embedder: LocalEmbedder) -> None:
    a, b, c = embedder.embed(
        [
            "Where is the food kept?",
            "The food is stored in the pantry.",
            "Quarterly revenue rose.",
        ]
    )
    assert len(a) == 384 and np.isclose(np.linalg.norm(a), 1.0, atol=1e-4)
    assert np.dot(a, b) > np.dot(a, c) + 0.2


def test_length_grouping_keeps_order_and_values(embedder: LocalEmbedder) -> None:
    long = "A long passage about harbours and ships. " * 40
    texts = ["short one", long, "another short one", long[:300]]
    together = embedder.embed(texts)
    alone = [embedder.embed([t])[0] for t in texts]
    assert np.allclose(together, alone, atol=1e-4)
    assert _length_groups(texts, 64) == [[0, 2], [3], [1]]


def test_embedder_choice() -> None:
    assert isinstance(make_embedder(ModelsConfig()), LocalEmbedder)
    assert isinstance(make_embedder(ModelsConfig(embedding="openai/x")), LiteLLMEmbedder)
    with pytest.raises(EmbeddingError, match="unknown local embedding model 'local/other'"):
        make_embedder(ModelsConfig(embedding="local/other"))
