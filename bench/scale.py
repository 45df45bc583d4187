"""Knowledge bases of 1k, 10k and 100k points for the query-latency rows of ``bench/run.py``.

How the stores are made: the first 200 squad-dev paragraphs are ingested for real (the
offline default chains and model: ~1.1k points); the 10k and 100k stores add *filler*
documents, real paragraphs of squad-dev and SciFact (repeated with a numbered suffix
where more are needed), through the same ingest path, but embedded by ``MixEmbedder``:
each vector mixes two real MiniLM vectors of the first 200 paragraphs plus noise. That
keeps the store's vectors on the model's manifold (clustered, like real data) at a
fraction of the embedding time. Queries are real squad-dev questions embedded by the
real model. The 100k store crosses ``store.index_min_points``, so its ingest ends by
building HNSW, as any user's would. Built stores are kept in ~/.cache/flexmatch/bench.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.stores.base import SCHEMA_VERSION

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CACHE = Path.home() / ".cache" / "flexmatch" / "bench"
SIZES = (1_000, 10_000, 100_000)
BASE_DOCS = 200


class MixEmbedder:
    """Plausible vectors without running the model: two real vectors and some noise,
    chosen by a hash of the text (deterministic)."""

    def __init__(self, real: OnnxEmbedder, basis: np.ndarray) -> None:
        self.name = real.name
        self.dimension = real.dimension
        self._basis = basis

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest())
            rng = np.random.default_rng(seed)
            a, b = rng.integers(0, len(self._basis), 2)
            weight = rng.uniform(0.2, 0.8)
            noise = rng.normal(0, 0.02, self._basis.shape[1])
            vector = weight * self._basis[a] + (1 - weight) * self._basis[b] + noise
            out.append((vector / np.linalg.norm(vector)).tolist())
        return out


def _paragraphs() -> list[dict[str, str]]:
    rows = []
    for name in ("squad-dev", "scifact"):
        for line in (DATA / name / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            rows.append({"title": row.get("title", ""), "text": row["text"]})
    return rows[BASE_DOCS:]


def _filler(count: int, start: int) -> Iterator[str]:
    rows = _paragraphs()
    for n in range(start, start + count):
        row = rows[n % len(rows)]
        suffix = f" (copy {n // len(rows)})" if n >= len(rows) else ""
        text = row["text"] + suffix
        yield json.dumps({"_id": f"filler-{n}", "title": row["title"], "text": text})


def _points(kb: KnowledgeBase) -> int:
    return kb.stats().matching_texts


def build(embedder: OnnxEmbedder, log: bool = True) -> dict[int, Path]:
    """One knowledge base per size, grown from the last (cached between runs)."""
    key = f"schema{SCHEMA_VERSION}-v1-{embedder.name.rsplit('/', 1)[-1]}"  # the model's vectors
    root = CACHE / key
    done = {size: root / f"kb-{size}" for size in SIZES}
    if all((p / ".built").is_file() for p in done.values()):
        return done
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    base = root / "corpus-base.jsonl"
    lines = (DATA / "squad-dev" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    base.write_text("\n".join(lines[:BASE_DOCS]) + "\n", encoding="utf-8")
    work = root / "work"
    with KnowledgeBase.open(work, embedder=embedder, env={}) as kb:
        kb.ingest([base])
        basis = np.asarray(embedder.embed([json.loads(x)["text"] for x in lines[:BASE_DOCS]]))
    mix = MixEmbedder(embedder, basis)
    written = 0
    per_doc = 6.0  # points a filler document makes; learnt as batches go
    for size in SIZES:
        with KnowledgeBase.open(work, embedder=mix, env={}) as kb:
            points = _points(kb)
            while points < size * 0.97:
                count = max(1, int((size - points) / per_doc * 0.9))
                batch = root / f"filler-{written}.jsonl"
                batch.write_text("\n".join(_filler(count, written)) + "\n", encoding="utf-8")
                report = kb.ingest([batch])
                written += count
                per_doc = max(1.0, (_points(kb) - points) / count)
                points = _points(kb)
                if log:
                    hnsw = f", HNSW {report.index_seconds:.0f} s" if report.index_seconds else ""
                    print(f"  {size:,}: {points:,} points ({report.seconds:.0f} s{hnsw})")
        shutil.copytree(work, done[size])
        (done[size] / ".built").write_text(str(points), encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    return done
