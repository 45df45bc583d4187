"""The packaged model's ONNX graphs: exported once from its torch weights (``flexmatch
prepare``; torch is needed for this step only) into a cache folder, fused into ONNX
Runtime's BERT operators, and quantized to int8 beside it. Nothing is ever downloaded."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from flexmatch.config import LOCAL_EMBEDDING_MODEL_INT8
from flexmatch.engine.embedders.base import packaged_model_dir, quiet_transformers
from flexmatch.extras import require

EXPORT_FORMAT = 2  # 2: eager attention, fused into ONNX Runtime's BERT operators


def model_cache_dir() -> Path:
    """Where exported models are kept: ``$FLEXMATCH_CACHE``, else the user's cache."""
    explicit = os.environ.get("FLEXMATCH_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flexmatch"


def onnx_model_path() -> Path:
    """The ONNX export of the packaged model (its path names the weights it came from and
    the export's format, so a changed export is made afresh)."""
    weights = packaged_model_dir() / "model.safetensors"
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
            _export(packaged_model_dir(), target)
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

    ort = require("onnxruntime", "local", "optimizing the packaged embedding model")
    from onnxruntime.transformers import optimizer

    config = json.loads((packaged_model_dir() / "config.json").read_text(encoding="utf-8"))
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
    purpose = "exporting the packaged embedding model"
    torch = require("torch", "local", purpose)
    with quiet_transformers(purpose) as transformers:
        require("onnx", "local", purpose)
        # eager attention exports the plain BERT pattern that _optimize fuses (SDPA's does not)
        model = transformers.AutoModel.from_pretrained(
            str(folder), attn_implementation="eager", local_files_only=True
        )
    model.eval()
    import warnings

    class Encoder(torch.nn.Module):  # type: ignore[name-defined]  # torch: a runtime import
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
    require("onnxruntime", "local", "quantizing the packaged embedding model")
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
