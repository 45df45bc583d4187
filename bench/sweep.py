"""Compare query-side settings on one ingested corpus (default ingest chains).

The corpus is ingested once into --work (kept between runs); each variant then runs the
real query path. Tune on a train split, report on test:
  .venv/bin/python bench/sweep.py ../shared/data/scifact --split train
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from flexmatch.config import ChainRef, KBConfig, QueryConfig
from flexmatch.evaluation import BeirDataset, evaluate
from flexmatch.knowledge_base import KnowledgeBase

CONTENT_ONLY = {"match_kind": "content"}

VARIANTS: dict[str, tuple[dict, dict | None]] = {
    "bm25 passages": ({"retrieval": "lexical", "reranker": "none"}, None),
    "dense passages": ({"retrieval": "dense", "reranker": "none"}, CONTENT_ONLY),
    "rrf passages": (
        {"retrieval": "hybrid", "dense_weight": 1, "lexical_weight": 1, "reranker": "none"},
        CONTENT_ONLY,
    ),
    "dense sentences+content": ({"retrieval": "dense", "reranker": "none"}, None),
    "hybrid rrf 1/1": ({"dense_weight": 1, "lexical_weight": 1, "reranker": "none"}, None),
    "hybrid rrf .7/.3": ({"reranker": "none"}, None),
    "hybrid dbsf 1/1": (
        {"fusion": "dbsf", "dense_weight": 1, "lexical_weight": 1, "reranker": "none"},
        None,
    ),
    "hybrid weighted .7/.3": ({"fusion": "weighted", "reranker": "none"}, None),
    "hybrid rrf + fusion rerank": (
        {"dense_weight": 1, "lexical_weight": 1, "reranker": "fusion-rerank"},
        None,
    ),
}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--only", nargs="*", help="variant names to run")
    parser.add_argument("--work", type=Path, default=Path("/tmp/flexmatch-sweep"))
    args = parser.parse_args()
    dataset = BeirDataset.load(args.data, args.split)
    folder = args.work / args.data.name
    fresh = not folder.exists()
    kb = KnowledgeBase.open(folder, config=KBConfig(), env={})
    with kb:
        if fresh:
            started = time.perf_counter()
            report = await kb.aingest([dataset.corpus])
            print(
                f"ingested {report.documents} docs, {report.matching_texts} texts "
                f"in {time.perf_counter() - started:.0f}s",
                flush=True,
            )
        for name, (query, filters) in VARIANTS.items():
            if args.only and name not in args.only:
                continue
            settings = {**query}
            settings["reranker"] = ChainRef(chain=settings["reranker"])
            kb.use_query_config(QueryConfig(query_transform=ChainRef(chain="identity"), **settings))
            if filters:
                original = kb.aquery

                async def filtered(text: str, _f: dict = filters, _q=original, **kw: object):
                    return await _q(text, filters=_f, **kw)

                kb.aquery = filtered  # type: ignore[method-assign]
            scores = await evaluate(kb, dataset, args.limit)
            if filters:
                del kb.aquery
            print(
                f"{name:32s} nDCG@10 {scores.ndcg_at_10:.4f}  R@5 {scores.recall_at_5:.4f}  "
                f"R@10 {scores.recall_at_10:.4f}  MRR {scores.mrr_at_10:.4f}  "
                f"{scores.latency_median_ms:.0f} ms",
                flush=True,
            )


if __name__ == "__main__":
    asyncio.run(main())
