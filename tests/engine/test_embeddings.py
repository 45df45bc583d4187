from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flexmatch.config import (
    LOCAL_EMBEDDING_MODEL_FP32,
    LOCAL_EMBEDDING_MODEL_INT8,
    ModelsConfig,
    cpu_has_int8_dot,
    default_embedding_model,
)
from flexmatch.engine.embedders import (
    LiteLLMEmbedder,
    LocalEmbedder,
    OnnxEmbedder,
    make_embedder,
)
from flexmatch.engine.embedders.base import packaged_model_dir
from flexmatch.engine.embedders.export import (
    onnx_model_path,
    optimized_model_path,
    quantized_model_path,
)
from flexmatch.engine.embedders.onnx_minilm import _token_groups
from flexmatch.engine.embedders.torch_minilm import _length_groups
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


def test_token_groups_respect_the_budget_and_cap() -> None:
    """Runs are sized by padded tokens: many short questions share one, long passages go
    a few at a time, and every text is in exactly one run."""
    lengths = [12] * 100 + [256] * 9 + [7, 300]
    groups = _token_groups(lengths, budget=1024, cap=64)
    assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    for group in groups:
        assert len(group) <= 64
        assert len(group) == 1 or len(group) * max(lengths[i] for i in group) <= 1024
    assert sorted(len(group) for group in groups if lengths[group[0]] <= 12) == [37, 64]
    assert max(len(group) for group in groups if lengths[group[-1]] >= 256) == 4


def test_token_groups_pad_as_little_as_they_can() -> None:
    """A few dozen texts of mixed lengths (what an ingest hands over at a time): short
    texts are not padded to a long one's length for the sake of a fuller run."""
    lengths = [10] * 6 + [60] * 2 + [200] * 3
    groups = _token_groups(lengths, budget=1024, cap=64)
    assert sorted(sorted(lengths[i] for i in group) for group in groups) == [
        [10] * 6,
        [60] * 2,
        [200] * 3,
    ]
    import random

    rng = random.Random(7)
    mixed = [rng.choice([rng.randint(8, 40), rng.randint(100, 256)]) for _ in range(42)]
    padded = sum(len(g) * max(mixed[i] for i in g) for g in _token_groups(mixed, 1024, 64))
    assert padded <= 1.1 * sum(mixed)


def test_embedder_choice() -> None:
    assert isinstance(make_embedder(ModelsConfig()), OnnxEmbedder)
    int8 = make_embedder(ModelsConfig(embedding=LOCAL_EMBEDDING_MODEL_INT8))
    assert isinstance(int8, OnnxEmbedder) and int8.name == LOCAL_EMBEDDING_MODEL_INT8
    assert isinstance(make_embedder(ModelsConfig(embedding="openai/x")), LiteLLMEmbedder)
    with pytest.raises(EmbeddingError, match="unknown local embedding model 'local/other'"):
        make_embedder(ModelsConfig(embedding="local/other"))


def _spread_by_length(texts: list[str], count: int) -> list[str]:
    """``count`` of ``texts`` evenly spaced in length order, the shortest and the longest
    among them: every length the set has, not only its first lines' ones."""
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
    return [texts[order[round(k * (len(order) - 1) / (count - 1))]] for k in range(count)]


@pytest.fixture(scope="module")
def thousand_texts(squad_dev: Path) -> list[str]:
    """1,000 real texts, questions and passages of all lengths, from a 6-token question
    to passages past the 256-token truncation.

    The texts are spread over the whole length range rather than taken from the top of
    the files; a passage costs ~10x a question, so 100 of the 1,000 are passages (all
    lengths, 11 of them truncated) and the rest questions."""
    import json

    from tokenizers import Tokenizer

    def read(name: str) -> list[str]:
        with (squad_dev / name).open(encoding="utf-8") as lines:
            return [json.loads(line)["text"] for line in lines]

    questions = _spread_by_length(read("queries.jsonl"), 900)
    passages = _spread_by_length(read("corpus.jsonl"), 100)
    texts = questions + passages
    assert len(set(texts)) == 1000
    tokenizer = Tokenizer.from_file(str(packaged_model_dir() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    lengths = [len(e.ids) for e in tokenizer.encode_batch(texts)]
    assert min(lengths) <= 8 and sum(n > 256 for n in lengths) >= 10  # cut at 256 tokens
    return texts


@pytest.fixture(scope="module")
def fp32_vectors(thousand_texts: list[str]) -> np.ndarray:
    return np.asarray(OnnxEmbedder(LOCAL_EMBEDDING_MODEL_FP32).embed(thousand_texts))


def test_onnx_vectors_match_the_torch_model(
    thousand_texts: list[str], fp32_vectors: np.ndarray
) -> None:
    """The fp32 ONNX Runtime model gives the sentence-transformers vectors: cosine >= 0.999
    for every one of the 1,000 texts."""
    torch = np.asarray(LocalEmbedder().embed(thousand_texts))
    cosines = (fp32_vectors * torch).sum(axis=1)
    assert cosines.min() >= 0.999, cosines.min()


def test_the_torch_reference_loads_quietly(capfd: pytest.CaptureFixture[str]) -> None:
    """Loading the packaged weights draws no progress bar, and transformers' own settings
    are as they were afterwards (no process-wide switch is left behind)."""
    import transformers

    before = transformers.logging.is_progress_bar_enabled(), transformers.logging.get_verbosity()
    LocalEmbedder().embed(["where is the harbour?"])
    assert "Loading weights" not in capfd.readouterr().err
    after = transformers.logging.is_progress_bar_enabled(), transformers.logging.get_verbosity()
    assert after == before


def test_int8_is_the_default_only_where_the_cpu_has_vnni() -> None:
    amd = "processor\t: 0\nflags\t\t: fpu avx2 fma avx512f avx512_vnni avx512_bf16\n"
    intel_client = "flags\t\t: sse4_2 avx2 avx_vnni\n"
    avx2_only = "flags\t\t: sse4_2 avx2 fma avx512f avx512bw\n"
    assert cpu_has_int8_dot(amd) and cpu_has_int8_dot(intel_client)
    assert not cpu_has_int8_dot(avx2_only) and not cpu_has_int8_dot("")
    expected = LOCAL_EMBEDDING_MODEL_INT8 if cpu_has_int8_dot() else LOCAL_EMBEDDING_MODEL_FP32
    assert default_embedding_model() == ModelsConfig().embedding == expected
    assert OnnxEmbedder().name == expected


@pytest.mark.skipif(
    not cpu_has_int8_dot(), reason="no VNNI here: int8 products may saturate, fp32 is the default"
)
def test_int8_vectors_stay_close_to_fp32(
    thousand_texts: list[str], fp32_vectors: np.ndarray
) -> None:
    """The int8 model's vectors of the same 1,000 texts: cosine >= 0.99 on average and
    >= 0.975 for every one against fp32 (measured 0.9936 / 0.984; one scale a tensor
    instead of one a channel gives 0.963 / 0.898 and fails this)."""
    int8 = np.asarray(OnnxEmbedder(LOCAL_EMBEDDING_MODEL_INT8).embed(thousand_texts))
    cosines = (int8 * fp32_vectors).sum(axis=1)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.975, (cosines.mean(), cosines.min())


def test_the_int8_graph_runs_integer_products() -> None:
    """The int8 model serves quantized operators (the attention's too), weights in int8."""
    import onnx

    OnnxEmbedder(LOCAL_EMBEDDING_MODEL_INT8).embed(["load it"])
    graph = onnx.load(str(quantized_model_path()), load_external_data=False).graph
    kinds = [node.op_type for node in graph.node]
    assert kinds.count("QAttention") == 6 and "DynamicQuantizeLinear" in kinds, set(kinds)
    assert "MatMul" not in kinds  # every product quantized
    weights = [t for t in graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert sum(np.prod(t.dims) for t in weights) > 10_000_000  # the ~11M weights of 6 layers


def test_the_served_graph_has_fused_attention(embedder: OnnxEmbedder) -> None:
    """The model that is served is the fused one (one Attention operator a layer)."""
    import onnx

    embedder.embed(["load it"])
    graph = onnx.load(str(optimized_model_path()), load_external_data=False).graph
    kinds = [node.op_type for node in graph.node]
    assert kinds.count("Attention") == 6 and "SkipLayerNormalization" in kinds


def test_the_query_path_imports_no_torch(tmp_path) -> None:
    """Embedding with the default model never imports torch or transformers."""
    import subprocess
    import sys

    assert onnx_model_path().is_file()
    code = (
        "import sys\n"
        "from flexmatch.engine.embedders import OnnxEmbedder\n"
        "OnnxEmbedder().embed(['where is the harbour?'])\n"
        "print(','.join(m for m in ('torch', 'transformers', 'sentence_transformers') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_embedding_writes_nothing_under_home(tmp_path) -> None:
    """ONNX Runtime's telemetry is off before it is imported (``import flexmatch`` sets
    ``ORT_DISABLE_TELEMETRY``): embedding leaves no device id under the user's home."""
    import os
    import subprocess
    import sys

    from flexmatch.engine.embedders import model_cache_dir

    home = tmp_path / "home"
    home.mkdir()
    unset = ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")
    env = {name: value for name, value in os.environ.items() if name not in unset}
    env |= {"HOME": str(home), "FLEXMATCH_CACHE": str(model_cache_dir())}
    code = (
        "from flexmatch.engine.embedders import OnnxEmbedder\n"
        "OnnxEmbedder().embed(['where is the harbour?'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []


def test_an_unfused_graph_is_served_with_a_warning(
    tmp_path, monkeypatch: pytest.MonkeyPatch, embedder: OnnxEmbedder
) -> None:
    """Should ONNX Runtime one day not fuse the export, the plain graph is optimised and
    served (same vectors), with a warning, and no step file is left behind."""
    import onnx
    from onnxruntime.transformers import optimizer

    from flexmatch.engine.embedders.export import _optimize

    class Unfused:
        def get_fused_operator_statistics(self) -> dict[str, int]:
            return {"Attention": 0}

    monkeypatch.setattr(optimizer, "optimize_model", lambda *a, **k: Unfused())
    target = tmp_path / "model.optimized.onnx"
    with pytest.warns(UserWarning, match="did not fuse"):
        _optimize(onnx_model_path(), target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.optimized.onnx"]
    kinds = [n.op_type for n in onnx.load(str(target), load_external_data=False).graph.node]
    assert "Attention" not in kinds and "MatMul" in kinds
