"""The FlexMatch side of bench/vs_llamaindex.py: one LLM ingest of a corpus, in a fresh
interpreter like the LlamaIndex side, so neither shares a process with the fake server.

A fresh knowledge base asks the orchestrator's fake server for questions and context
(``llm_concurrency`` calls in flight) and embeds with the packaged all-MiniLM-L6-v2 on
ONNX Runtime. Imports (litellm included, which the first LLM call would otherwise pay)
and the model load are timed apart from ``kb.ingest``, as LlamaIndex's are from its
pipeline.

Prints one JSON line: {"import_s", "load_s", "pipeline_s", "documents", "chunks",
"matching_texts", "calls"}.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="JSON Lines, one {_id, title, text} a line")
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible /v1 base URL")
    parser.add_argument("--concurrency", type=int, default=8, help="models.llm_concurrency")
    parser.add_argument("--embedding", help="a packaged model (default: the machine's)")
    return parser.parse_args()


def main() -> None:
    started = time.perf_counter()
    args = arguments()
    from flexmatch import KnowledgeBase
    from flexmatch.engine.embedders import OnnxEmbedder
    from flexmatch.engine.llm import import_litellm

    import_litellm()
    imported = time.perf_counter()
    embedder = OnnxEmbedder(args.embedding)  # as the CLI's: runs on every core at once
    embedder.embed(["warm up"] * OnnxEmbedder.BULK)  # loads the session, starts the workers
    loaded = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="flexmatch-bench-") as folder:
        kb_dir = Path(folder)
        (kb_dir / "flexmatch.yaml").write_text(
            f"models:\n  llm: openai/gpt-4o-mini\n  llm_api_base: {args.base_url}\n"
            f"  llm_api_key: k\n  llm_concurrency: {args.concurrency}\n",
            encoding="utf-8",
        )
        with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
            began = time.perf_counter()
            report = kb.ingest([args.corpus])
            ended = time.perf_counter()

    print(
        json.dumps(
            {
                "import_s": imported - started,
                "load_s": loaded - imported,
                "pipeline_s": ended - began,
                "documents": report.added,
                "chunks": report.chunks,
                "matching_texts": report.matching_texts,
                "calls": report.usage.calls,
            }
        )
    )


if __name__ == "__main__":
    main()
