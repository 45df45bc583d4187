"""The packaged all-MiniLM-L6-v2 on ONNX Runtime with the ``tokenizers`` tokenizer: the
served local model, so neither a query nor an ingest imports torch (5-15 s on a small
machine)."""

from __future__ import annotations

import json
import math
import threading
from typing import Any

from flexmatch.config import LOCAL_EMBEDDING_MODEL_INT8, default_embedding_model
from flexmatch.engine.embedders.base import packaged_model_dir
from flexmatch.engine.embedders.export import local_model_path, prepare_local_model
from flexmatch.engine.embedders.threads import bulk_threads, run_pool
from flexmatch.errors import EmbeddingError
from flexmatch.extras import require

MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
RUN_COST = 16  # a model run's fixed cost, in padded tokens (~1.2 ms on a 2-core machine)


def _token_groups(lengths: list[int], budget: int, cap: int) -> list[list[int]]:
    """Indices in runs of similar token length that cost the fewest padded tokens (plus
    ``RUN_COST`` a run), each at most ``budget`` tokens once padded to its longest text
    and at most ``cap`` texts.

    A budget, not a text count, sizes a run: attention costs batch x length squared in
    memory, and on a small CPU 64 passages of 256 tokens (200 MB of attention scores) ran
    1.6x slower than runs of 4. The split is chosen exactly (dynamic programming over the
    texts sorted by length), not by filling each run in turn: an ingest hands over a few
    dozen texts of mixed lengths at a time, where filling runs padded 31 % more tokens."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    sizes = [lengths[i] for i in order]
    best = [0.0] + [math.inf] * len(sizes)  # best[j]: cheapest split of the first j texts
    start = [0] * (len(sizes) + 1)  # where the last run of that split starts
    for end in range(1, len(sizes) + 1):
        for first in range(end - 1, max(-1, end - 1 - cap), -1):
            count = end - first
            if count > 1 and count * sizes[end - 1] > budget:
                break
            cost = best[first] + count * sizes[end - 1] + RUN_COST
            if cost < best[end]:
                best[end], start[end] = cost, first
    groups: list[list[int]] = []
    end = len(sizes)
    while end > 0:
        groups.append(order[start[end] : end])
        end = start[end]
    return groups[::-1]


# texts tokenized per call: the tokenizer takes the GIL back and forth within a call, and
# in slices a document's 5,000 texts left other threads (a server's event loop) waiting
# at most 39 ms instead of 70 ms, and took 1.25 s instead of 1.71 s
TOKENIZE_SLICE = 128


class OnnxEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime: tokenize, run, mean-pool, normalise.

    Every run uses one thread; a batch's runs go to every core at once (``threads`` fixes
    how many), which on two cores gives ~1.3x (fp32) and ~1.4x (int8) the texts a second
    of one run spread over both cores: the small matrix products of a short run parallelise
    poorly, separate runs perfectly. A call of fewer than ``BULK`` tokens (a query's few
    texts) runs on its caller's thread, so concurrent queries do not fight over cores.

    Runs: fp32 groups texts of similar length (``TOKEN_BUDGET`` padded tokens a run); int8
    runs each text alone, because its activations are quantized with one scale a run,
    which would make a text's vector depend on the texts beside it (cosine ~0.994 to
    itself alone); alone, in parallel, it is as fast as in groups."""

    BULK = 128  # tokens from which a call counts as a batch (a query's few texts do not)
    TOKEN_BUDGET = 1024  # padded tokens a run: fastest on 2 cores for questions and passages

    def __init__(
        self, name: str | None = None, batch_size: int = 64, threads: int | None = None
    ) -> None:
        self.name = name or default_embedding_model()
        self.batch_size = batch_size
        self.threads = threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._dimension: int | None = None
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        """From the model's config: no model is loaded to know it."""
        if self._dimension is None:
            config = json.loads((packaged_model_dir() / "config.json").read_text(encoding="utf-8"))
            self._dimension = int(config["hidden_size"])
        return self._dimension

    def _workers_for(self, tokens: int) -> int:
        if self.threads is not None:
            return self.threads
        return bulk_threads() if tokens >= self.BULK else 1

    def _load(self) -> Any:
        """The model's session (one thread a run), loaded on first use."""
        with self._lock:
            if self._session is None:
                ort = require("onnxruntime", "local", "the packaged embedding model")
                path = local_model_path(self.name)
                if not path.is_file():
                    prepare_local_model()
                options = ort.SessionOptions()
                options.intra_op_num_threads = 1
                options.inter_op_num_threads = 1
                # already optimised by prepare_local_model: loading skips that pass
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
                try:
                    self._session = ort.InferenceSession(
                        str(path), options, providers=["CPUExecutionProvider"]
                    )
                except Exception as exc:
                    raise EmbeddingError(f"could not load {path}: {exc}") from exc
            return self._session

    def _load_tokenizer(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                tokenizers = require("tokenizers", "local", "the packaged embedding model")
                tokenizer = tokenizers.Tokenizer.from_file(
                    str(packaged_model_dir() / "tokenizer.json")
                )
                tokenizer.enable_truncation(MAX_TOKENS)
                tokenizer.no_padding()  # each run is padded to its own longest text
                self._tokenizer = tokenizer
            return self._tokenizer

    def _runs(self, lengths: list[int], workers: int) -> list[list[int]]:
        """Indices of the texts each run takes, at least one run a worker where the texts
        allow, the costliest first (so no long run is left to finish alone at the end)."""
        if self.name == LOCAL_EMBEDDING_MODEL_INT8:
            runs = [[index] for index in range(len(lengths))]
        else:
            cap = min(self.batch_size, -(-len(lengths) // workers))
            runs = _token_groups(lengths, self.TOKEN_BUDGET, cap)
        return sorted(runs, key=lambda run: -len(run) * max(lengths[i] for i in run))

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        import numpy as np

        tokenizer = self._load_tokenizer()
        encoded: list[list[int]] = []
        for start in range(0, len(texts), TOKENIZE_SLICE):  # the GIL is let go between slices
            encoded.extend(
                e.ids for e in tokenizer.encode_batch(texts[start : start + TOKENIZE_SLICE])
            )
        lengths = [len(ids) for ids in encoded]
        session = self._load()
        vectors: list[list[float]] = [[] for _ in texts]

        def run(group: list[int]) -> None:
            width = max(lengths[i] for i in group)
            ids = np.zeros((len(group), width), dtype=np.int64)
            mask = np.zeros((len(group), width), dtype=np.int64)
            for row, index in enumerate(group):
                ids[row, : lengths[index]] = encoded[index]
                mask[row, : lengths[index]] = 1
            hidden = session.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for index, row in zip(group, pooled, strict=True):
                vectors[index] = row.tolist()

        workers = self._workers_for(sum(lengths))
        runs = self._runs(lengths, workers)
        if workers == 1 or len(runs) == 1:
            for group in runs:
                run(group)
        else:
            list(run_pool(workers).map(run, runs))  # re-raises a run's error
        return vectors
