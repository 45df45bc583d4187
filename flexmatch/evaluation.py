"""Retrieval evaluation on labelled data in BEIR layout: nDCG@10, recall@k, MRR@10.

Metrics, data sets and setups live here, and ``run_setups``, which runs setups side by
side on knowledge bases it opens (``flexmatch.evaluate_setups`` opens them as
``KnowledgeBase.open`` does: this module stays below the facade, which the service
layer's evaluation records need).

A BEIR folder holds ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``
(query-id, corpus-id, score; scores above 1 are graded relevance).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from flexmatch.async_bridge import run_sync
from flexmatch.config import (
    KBConfig,
    QueryConfig,
    SourceConfig,
    current_query_keys,
    ingest_side,
)
from flexmatch.config_templates import deep_merge
from flexmatch.engine.embedders import Embedder
from flexmatch.errors import ConfigError
from flexmatch.models import IngestReport, SearchResult
from flexmatch.resources import builtin_dir
from flexmatch.yamlio import read_yaml, validate


@dataclass(frozen=True)
class BeirDataset:
    corpus: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]

    @classmethod
    def load(cls, folder: Path, split: str = "test") -> BeirDataset:
        corpus, queries_path = folder / "corpus.jsonl", folder / "queries.jsonl"
        qrels_path = folder / "qrels" / f"{split}.tsv"
        for path in (corpus, queries_path, qrels_path):
            if not path.is_file():
                raise ConfigError(f"{folder}: not a BEIR data set ({path.name} is missing)")
        qrels: dict[str, dict[str, int]] = {}
        for number, line in enumerate(qrels_path.read_text(encoding="utf-8-sig").splitlines()):
            parts = line.split("\t")
            if (number == 0 and parts[0] == "query-id") or not line.strip():
                continue
            if len(parts) != 3:
                raise ConfigError(f"{qrels_path}:{number + 1}: expected 3 tab-separated fields")
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
        queries = {}
        for line in queries_path.read_text(encoding="utf-8-sig").splitlines():
            if line.strip():
                row = json.loads(line)
                if row["_id"] in qrels:
                    queries[row["_id"]] = row["text"]
        return cls(corpus=corpus, queries=queries, qrels=qrels)


def ndcg_at_k(ranking: list[str], relevant: dict[str, int], k: int = 10) -> float:
    """Normalised discounted cumulative gain with graded relevance (gain = grade)."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranking[:k]))
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranking: list[str], relevant: dict[str, int], k: int) -> float:
    wanted = {doc for doc, grade in relevant.items() if grade > 0}
    return len(wanted & set(ranking[:k])) / len(wanted) if wanted else 0.0


def mrr_at_k(ranking: list[str], relevant: dict[str, int], k: int = 10) -> float:
    for i, doc in enumerate(ranking[:k]):
        if relevant.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


class Scores(BaseModel):
    """Averages over the queries, and query latency in milliseconds."""

    queries: int
    ndcg_at_10: float
    recall_at_5: float
    recall_at_10: float
    mrr_at_10: float
    latency_median_ms: float
    latency_p95_ms: float


class Searchable(Protocol):
    """What evaluation needs of a knowledge base: the real query path."""

    async def aquery(self, text: str, *, top_n: int | None = None) -> list[SearchResult]: ...


async def evaluate(
    kb: Searchable,
    dataset: BeirDataset,
    limit: int | None = None,
    candidates: int = 30,
    on_query: Callable[[], None] | None = None,
) -> Scores:
    """Run every query through the real query path; rank documents by their best chunk."""
    totals = {"ndcg": 0.0, "r5": 0.0, "r10": 0.0, "mrr": 0.0}
    latencies: list[float] = []
    items = list(dataset.queries.items())[:limit]
    for query_id, text in items:
        started = time.perf_counter()
        results = await kb.aquery(text, top_n=candidates)
        latencies.append((time.perf_counter() - started) * 1000)
        ranking = list(dict.fromkeys(r.document_id for r in results))
        relevant = dataset.qrels[query_id]
        totals["ndcg"] += ndcg_at_k(ranking, relevant)
        totals["r5"] += recall_at_k(ranking, relevant, 5)
        totals["r10"] += recall_at_k(ranking, relevant, 10)
        totals["mrr"] += mrr_at_k(ranking, relevant)
        if on_query is not None:
            on_query()
    n = max(1, len(items))
    ordered = sorted(latencies) or [0.0]
    return Scores(
        queries=len(items),
        ndcg_at_10=round(totals["ndcg"] / n, 4),
        recall_at_5=round(totals["r5"] / n, 4),
        recall_at_10=round(totals["r10"] / n, 4),
        mrr_at_10=round(totals["mrr"] / n, 4),
        latency_median_ms=round(statistics.median(ordered), 1),
        latency_p95_ms=round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
    )


def evaluate_sync(kb: Searchable, dataset: BeirDataset, limit: int | None = None) -> Scores:
    return run_sync(evaluate(kb, dataset, limit))


# -- setups ------------------------------------------------------------------------------
BASELINES = ("bm25", "dense-passages", "rrf-passages")


@dataclass(frozen=True)
class Setup:
    """A named knowledge-base config fragment (chains and query settings) to evaluate.

    ``corpus_sources`` deals the corpus's documents to these sources in turn (the first
    document to the first source, the second to the second, ...): a mixed knowledge base,
    e.g. half indexed by questions and half by key phrases. None: all to the default."""

    name: str
    config: KBConfig
    corpus_sources: tuple[str, ...] | None = None

    @property
    def ingest_key(self) -> str:
        """Setups with the same ingest side share one ingested knowledge base."""
        return json.dumps([ingest_side(self.config), self.corpus_sources], sort_keys=True)

    def corpus_parts(self, corpus: Path, folder: Path) -> list[tuple[Path, str | None]]:
        """The corpus file(s) to ingest and the source each goes to."""
        if not self.corpus_sources:
            return [(corpus, None)]
        folder.mkdir(parents=True, exist_ok=True)
        lines = [line for line in corpus.read_text(encoding="utf-8-sig").splitlines() if line]
        count = len(self.corpus_sources)
        parts: list[tuple[Path, str | None]] = []
        for index, source in enumerate(self.corpus_sources):
            part = folder / f"corpus-{source}.jsonl"
            part.write_text("\n".join(lines[index::count]) + "\n", encoding="utf-8")
            parts.append((part, source))
        return parts


def load_setup(name_or_path: str, base: KBConfig) -> Setup:
    """A setup by built-in name (configs/setups/NAME.yaml) or by file path."""
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        path = builtin_dir("configs") / "setups" / f"{name_or_path}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in (builtin_dir("configs") / "setups").glob("*.yaml"))
            raise ConfigError(f"no setup '{name_or_path}' (a file, or one of: {', '.join(known)})")
    fragment = read_yaml(path)
    dealt = fragment.pop("corpus_sources", None)
    if "query" in fragment:
        try:
            fragment["query"] = current_query_keys(fragment["query"])
        except ValueError as exc:
            raise ConfigError(f"{path}: field 'query': {exc}") from None
    config = validate(KBConfig, deep_merge(base.model_dump(mode="json"), fragment), str(path))
    if dealt is not None:
        if not isinstance(dealt, list) or not dealt or any(s not in config.sources for s in dealt):
            sources = ", ".join(sorted(config.sources))
            raise ConfigError(
                f"{path}: field 'corpus_sources': a list of the setup's sources ({sources}), "
                f"got {dealt!r}"
            )
        return Setup(name=path.stem, config=config, corpus_sources=tuple(dealt))
    return Setup(name=path.stem, config=config)


# -- running setups side by side ---------------------------------------------------------
class Evaluated(Searchable, Protocol):
    """What running setups needs of a knowledge base it opens: ingest, a switch of the
    query settings, its embedding model (shared with the next one), and closing."""

    @property
    def embedder(self) -> Embedder: ...
    async def aingest(
        self, inputs: Iterable[str | Path] = (), *, source: str | None = None
    ) -> IngestReport: ...
    def use_query_config(
        self, query: QueryConfig, sources: dict[str, SourceConfig] | None = None
    ) -> None: ...
    def close(self) -> None: ...


class Opener(Protocol):
    """How ``run_setups`` opens a knowledge base (``KnowledgeBase.open``)."""

    def __call__(
        self, path: Path, *, config: KBConfig, env: dict[str, str], embedder: Embedder | None
    ) -> Evaluated: ...


async def run_setups(
    open_kb: Opener,
    setups: list[Setup],
    dataset: BeirDataset,
    work_dir: Path,
    *,
    limit: int | None = None,
    embedder: Embedder | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, tuple[IngestReport, Scores]]:
    """Ingest the corpus once per distinct ingest side (into a knowledge base ``open_kb``
    opens), then run each setup's queries on it."""
    groups: dict[str, list[Setup]] = {}
    for setup in setups:
        groups.setdefault(setup.ingest_key, []).append(setup)
    results: dict[str, tuple[IngestReport, Scores]] = {}
    total = min(limit or len(dataset.queries), len(dataset.queries))
    loaded: dict[str, Embedder] = {}  # without ``embedder``: each model loaded once
    for index, members in enumerate(groups.values()):
        folder = work_dir / f"kb-{index}"
        model = members[0].config.models.embedding
        kb = open_kb(
            folder, config=members[0].config, env={}, embedder=embedder or loaded.get(model)
        )
        try:
            loaded.setdefault(model, kb.embedder)
            if progress is not None:
                progress(f"ingest for {', '.join(m.name for m in members)}", 0, 1)
            parts = members[0].corpus_parts(dataset.corpus, work_dir / f"corpus-{index}")
            report = IngestReport.combined(
                [await kb.aingest([part], source=source) for part, source in parts]
            )
            for setup in members:
                kb.use_query_config(setup.config.query, setup.config.sources)
                done = 0

                def tick(name: str = setup.name) -> None:
                    nonlocal done
                    done += 1
                    if progress is not None:
                        progress(name, done, total)

                scores = await evaluate(kb, dataset, limit, on_query=tick)
                results[setup.name] = (report, scores)
        finally:
            kb.close()
    return results
