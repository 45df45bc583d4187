"""Query latency with per-document access filtering against the same queries without it.

    .venv/bin/python bench/access.py --points 100000

Builds (once; kept in ~/.cache/flexmatch/bench/access-N) a knowledge base of N match
points: N/10 documents of 10 points each, written through the store's own upsert with
the payloads the ingest writes (``MatchPayload`` and document records), their vectors
mixed from real MiniLM vectors of varied sentences plus noise (clustered like real data,
at a fraction of the embedding time). Half the documents are restricted, each to one to
three of 200 users and 20 groups; the other half carry no access list. Past
``store.index_min_points`` the store is optimised (HNSW), as an ingest would.

Then the same real queries (embedded by the real model) run as the admin (no filter) and
as principals holding a user and three groups, alternating, warm; it prints p50 and p95
of the whole ``kb.search`` and of its search stage for each, and the ratio.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import time
from pathlib import Path

import numpy as np

from flexmatch import Access, KnowledgeBase, Principal
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.points import MatchPayload, match_point_id
from flexmatch.engine.stores import StoredPoint
from flexmatch.models import DocumentRecord

CACHE = Path.home() / ".cache" / "flexmatch" / "bench"
WORDS = [
    "orchard",
    "harvest",
    "invoice",
    "salary",
    "deploy",
    "server",
    "holiday",
    "pension",
    "contract",
    "backup",
    "network",
    "printer",
    "budget",
    "audit",
    "release",
    "kernel",
    "policy",
    "training",
    "safety",
    "warehouse",
    "shipping",
    "customer",
    "refund",
    "ticket",
    "outage",
    "database",
    "schema",
    "migration",
    "laptop",
    "badge",
]
QUERIES = [
    "How is the pension contract audited?",
    "When does the warehouse shipping release happen?",
    "Who approves a refund for a customer ticket?",
    "What is the backup policy for the database?",
    "How do I get a laptop badge after training?",
    "What happens during a network outage?",
    "Where is the salary budget kept?",
    "How is a kernel migration deployed to the server?",
]
USERS = [f"user:u{i}" for i in range(200)]
GROUPS = [f"group:g{i}" for i in range(20)]
POINTS_PER_DOCUMENT = 10


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))


def build(folder: Path, points: int, embedder: OnnxEmbedder) -> None:
    """The knowledge base described above, written in slices."""
    rng = random.Random(24)
    basis = np.asarray(embedder.embed([_sentence(rng) for _ in range(256)]), dtype=np.float32)
    (folder).mkdir(parents=True, exist_ok=True)
    (folder / "flexmatch.yaml").write_text("sources:\n  default: {}\n", encoding="utf-8")
    with KnowledgeBase.open(folder, embedder=embedder) as kb:
        store = kb.store
        store.prepare(embedder.name, embedder.dimension)
        batch: list[StoredPoint] = []
        for d in range(points // POINTS_PER_DOCUMENT):
            document_id = f"doc-{d}"
            access = None
            if d % 2:
                chosen = rng.sample(USERS + GROUPS, rng.randint(1, 3))
                access = Access(principals=chosen).tokens()
            version = hashlib.sha256(document_id.encode()).hexdigest()[:24]
            record = DocumentRecord(
                id=document_id,
                source="default",
                uri=f"{document_id}.txt",
                content_hash=version,
                version=version,
                status="complete",
                chunks=POINTS_PER_DOCUMENT // 2,
                matching_texts=POINTS_PER_DOCUMENT,
                access=access,
            )
            kb.registry.put("default", record)
            for p in range(POINTS_PER_DOCUMENT):
                text = _sentence(rng)
                a, b = rng.randrange(len(basis)), rng.randrange(len(basis))
                w = rng.uniform(0.2, 0.8)
                noise = np.random.default_rng(d * 100 + p).normal(0, 0.02, basis.shape[1])
                vector = w * basis[a] + (1 - w) * basis[b] + noise
                vector /= np.linalg.norm(vector)
                chunk = f"{document_id}-c{p // 2}"
                payload = MatchPayload(
                    document_id=document_id,
                    chunk_id=chunk,
                    chunk_index=p // 2,
                    source="default",
                    version=version,
                    uri=record.uri,
                    content=text,
                    matched_text=text,
                    match_kind="content" if p % 2 == 0 else "question",
                    access=access,
                ).model_dump(exclude=None if access else {"access"})
                position = p % 2
                batch.append(
                    StoredPoint(
                        id=match_point_id("default", chunk, version, position),
                        vector=vector.tolist(),
                        text=text,
                        payload=payload,
                    )
                )
            if len(batch) >= 512:
                store.upsert("default", batch)
                batch = []
        store.upsert("default", batch)
        store.optimize(kb.config.store.index_min_points)
    (folder / "built.json").write_text(json.dumps({"points": points}), encoding="utf-8")


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=25, help="times each query runs")
    args = parser.parse_args()
    embedder = OnnxEmbedder()
    folder = CACHE / f"access-{args.points}"
    if not (folder / "built.json").is_file():
        started = time.perf_counter()
        build(folder, args.points, embedder)
        print(f"built {args.points:,} points in {time.perf_counter() - started:.0f} s")
    rng = random.Random(7)
    askers = [
        Principal(user=rng.choice(USERS)[5:], groups=tuple(g[6:] for g in rng.sample(GROUPS, 3)))
        for _ in range(len(QUERIES))
    ]
    timings: dict[str, list[float]] = {"admin": [], "principal": []}
    stages: dict[str, list[float]] = {"admin": [], "principal": []}
    found: dict[str, list[int]] = {"admin": [], "principal": []}
    with KnowledgeBase.open(folder, embedder=embedder) as kb:
        for query in QUERIES:  # warm: the model, the store's pages
            kb.search(query)
            kb.search(query, principal=askers[0])
        for _ in range(args.rounds):
            for query, who in zip(QUERIES, askers, strict=True):
                for name, principal in (("admin", None), ("principal", who)):
                    started = time.perf_counter()
                    answer = kb.search(query, principal=principal)
                    timings[name].append((time.perf_counter() - started) * 1000)
                    stages[name].append(answer.stage_ms.get("search", 0.0))
                    found[name].append(len(answer.results))
    base = percentiles(timings["admin"])
    print(f"{args.points:,} points, {len(timings['admin'])} queries each")
    for name in ("admin", "principal"):
        p50, p95 = percentiles(timings[name])
        s50, s95 = percentiles(stages[name])
        print(
            f"{name:>9}: query p50 {p50:.1f} ms, p95 {p95:.1f} ms (x{p50 / base[0]:.2f}, "
            f"x{p95 / base[1]:.2f}); search stage p50 {s50:.1f} ms, p95 {s95:.1f} ms; "
            f"results {statistics.mean(found[name]):.1f}"
        )


if __name__ == "__main__":
    main()
