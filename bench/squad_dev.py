"""Retrieval quality and speed on SQuAD dev (BEIR layout) with the offline defaults.

Two setups, same chunker and model (the default int8 all-MiniLM-L6-v2, no LLM): the
chunk text alone, and the default matching texts (each sentence with its title, plus the
chunk).
Run:  .venv/bin/python bench/squad_dev.py [--data ../shared/data/squad-dev] [--limit N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from flexmatch.config import ChainRef, KBConfig
from flexmatch.engine.embedders import make_embedder
from flexmatch.evaluation import BeirDataset, evaluate_sync
from flexmatch.knowledge_base import KnowledgeBase

SETUPS = {"chunk text only": "content", "default matching texts": "questions"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    default_data = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad-dev"
    parser.add_argument("--data", type=Path, default=default_data)
    parser.add_argument("--limit", type=int, default=None, help="evaluate the first N queries")
    args = parser.parse_args()
    dataset = BeirDataset.load(args.data)
    embedder = make_embedder(KBConfig().models)  # the offline default: the int8 model
    rows = []
    for label, matching in SETUPS.items():
        config = KBConfig()
        config.sources["default"].matching_text = ChainRef(chain=matching)
        with tempfile.TemporaryDirectory() as folder:
            kb = KnowledgeBase.open(folder, config=config, env={}, embedder=embedder)
            with kb:
                started = time.perf_counter()
                report = kb.ingest([dataset.corpus])
                ingest_s = time.perf_counter() - started
                scores = evaluate_sync(kb, dataset, args.limit)
        rows.append((label, report.documents, report.matching_texts, ingest_s, scores))
        print(f"{label}: {scores.model_dump()} ingest {ingest_s:.1f}s", flush=True)
    print()
    print(
        "| setup | docs | matching texts | ingest s | nDCG@10 | recall@5 | MRR@10 "
        "| query ms (median / p95) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, docs, texts, ingest_s, s in rows:
        print(
            f"| {label} | {docs} | {texts} | {ingest_s:.0f} | {s.ndcg_at_10:.3f} "
            f"| {s.recall_at_5:.3f} | {s.mrr_at_10:.3f} "
            f"| {s.latency_median_ms:.0f} / {s.latency_p95_ms:.0f} |"
        )
    print(f"\n{rows[0][4].queries} queries from {args.data}")


if __name__ == "__main__":
    main()
