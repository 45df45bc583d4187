from __future__ import annotations

import numpy as np
import pytest

from flexmatch.config import ModelsConfig
from flexmatch.engine.embeddings import (
    LiteLLMEmbedder,
    LocalEmbedder,
    OnnxEmbedder,
    _length_groups,
    make_embedder,
    onnx_model_path,
)
from flexmatch.errors import EmbeddingError


def test_local_model_is_offline_minilm(embedder: OnnxEmbedder) -> None:
    a, b, c = embedder.embed(
        [
            "Where is the food kept?",
            "The food is stored in the pantry.",
            "Quarterly revenue rose.",
        ]
    )
    assert len(a) == 384 and np.isclose(np.linalg.norm(a), 1.0, atol=1e-4)
    assert np.dot(a, b) > np.dot(a, c) + 0.2


def test_length_grouping_keeps_order_and_values(embedder: OnnxEmbedder) -> None:
    long = "A long passage about harbours and ships. " * 40
    texts = ["short one", long, "another short one", long[:300]]
    together = embedder.embed(texts)
    alone = [embedder.embed([t])[0] for t in texts]
    assert np.allclose(together, alone, atol=1e-4)
    assert _length_groups(texts, 64) == [[0, 2], [3], [1]]


def test_embedder_choice() -> None:
    assert isinstance(make_embedder(ModelsConfig()), OnnxEmbedder)
    assert isinstance(make_embedder(ModelsConfig(embedding="openai/x")), LiteLLMEmbedder)
    with pytest.raises(EmbeddingError, match="unknown local embedding model 'local/other'"):
        make_embedder(ModelsConfig(embedding="local/other"))


def test_onnx_vectors_match_the_torch_model(embedder: OnnxEmbedder) -> None:
    """1,000 real texts (questions and passages of all lengths): the ONNX Runtime model
    gives the sentence-transformers vectors, cosine >= 0.999 for every one."""
    import json
    from itertools import islice

    from tests.conftest import SHARED_DATA

    texts: list[str] = []
    for name in ("queries.jsonl", "corpus.jsonl"):
        with (SHARED_DATA / "squad-dev" / name).open(encoding="utf-8") as lines:
            texts += [json.loads(line)["text"] for line in islice(lines, 500)]
    assert len(texts) == 1000
    onnx = np.asarray(embedder.embed(texts))
    torch = np.asarray(LocalEmbedder().embed(texts))
    cosines = (onnx * torch).sum(axis=1)
    assert cosines.min() >= 0.999, cosines.min()


def test_the_query_path_imports_no_torch(tmp_path) -> None:
    """Embedding with the default model never imports torch or transformers."""
    import subprocess
    import sys

    assert onnx_model_path().is_file()
    code = (
        "import sys\n"
        "from flexmatch.engine.embeddings import OnnxEmbedder\n"
        "OnnxEmbedder().embed(['where is the harbour?'])\n"
        "print(','.join(m for m in ('torch', 'transformers', 'sentence_transformers') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
