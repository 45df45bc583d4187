"""How the offline fusion reranker's defaults were chosen: collect every candidate's
signals once (first stage: hybrid, DBSF), then score weightings of the signals offline.

  .venv/bin/python bench/rerank_grid.py ../shared/data/scifact --split train
Uses the knowledge base bench/sweep.py ingested into --work.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
from pathlib import Path

from flexmatch.config import ChainRef, KBConfig, QueryConfig
from flexmatch.evaluation import BeirDataset, ndcg_at_k
from flexmatch.knowledge_base import KnowledgeBase

SIGNALS = ("question", "content", "lexical")


def normalise(values: list[float], how: str) -> list[float]:
    if how == "minmax":
        low, high = min(values), max(values)
        return [(v - low) / (high - low) if high > low else 1.0 for v in values]
    mean, spread = statistics.fmean(values), statistics.pstdev(values) or 1.0
    return [(v - mean) / spread for v in values]


async def collect(kb: KnowledgeBase, dataset: BeirDataset, limit: int | None):
    rows = []
    for query_id, text in list(dataset.queries.items())[:limit]:
        results = await kb.aquery(text, top_n=50)
        signals = [
            {
                "doc": r.document_id,
                "first": r.score,
                "question": r.signals.question if r.signals.question is not None else 0.0,
                "content": r.signals.content if r.signals.content is not None else 0.0,
                "lexical": r.signals.lexical or 0.0,
            }
            for r in results
        ]
        rows.append((dataset.qrels[query_id], signals))
    return rows


def score(rows, weights: dict[str, float], how: str) -> float:
    total = 0.0
    for relevant, candidates in rows:
        if not candidates:
            continue
        combined = [0.0] * len(candidates)
        for name, weight in weights.items():
            for i, v in enumerate(normalise([c[name] for c in candidates], how)):
                combined[i] += weight * v
        order = sorted(range(len(candidates)), key=lambda i: -combined[i])
        ranking = list(dict.fromkeys(candidates[i]["doc"] for i in order))
        total += ndcg_at_k(ranking, relevant)
    return total / len(rows)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--work", type=Path, default=Path("/tmp/flexmatch-sweep"))
    args = parser.parse_args()
    dataset = BeirDataset.load(args.data, args.split)
    with KnowledgeBase.open(args.work / args.data.name, config=KBConfig(), env={}) as kb:
        kb.use_query_config(
            QueryConfig(
                query_transform=ChainRef(chain="identity"),
                fusion="dbsf",
                dense_weight=1,
                lexical_weight=1,
                reranker=ChainRef(chain="none"),
            )
        )
        rows = await collect(kb, dataset, args.limit)
    first = sum(
        ndcg_at_k(list(dict.fromkeys(c["doc"] for c in cands)), rel) for rel, cands in rows
    ) / len(rows)
    print(f"first stage (hybrid dbsf): nDCG@10 {first:.4f}")
    grid = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    results = []
    for how in ("minmax", "zscore"):
        for q, c in itertools.product(grid, grid):
            lex = round(1.0 - q - c, 2)
            if lex < 0:
                continue
            weights = {"question": q, "content": c, "lexical": lex}
            results.append((score(rows, weights, how), how, weights))
    for value, how, weights in sorted(results, key=lambda r: -r[0])[:12]:
        print(f"{value:.4f}  {how:6s}  {weights}")


if __name__ == "__main__":
    asyncio.run(main())
