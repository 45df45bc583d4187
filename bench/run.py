"""One benchmark, side by side: cold CLI, LLM ingest against its concurrency bound, offline
ingest against raw encode, query latency, LLM calls per chunk and cost per 1M document
tokens. It builds what it needs (from ../shared/data/squad-dev) in a temporary folder.

Run:  .venv/bin/python bench/run.py [--docs 200] [--latency 0.3] [--concurrency 8]
Not a test: figures vary with the machine's load; compare ratios, run it twice.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import scale  # bench/scale.py: the 1k / 10k / 100k stores

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.points import CHUNK_FIELDS
from flexmatch.testing import FakeLLMServer

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "squad-dev"
FLEXMATCH = Path(sys.executable).parent / "flexmatch"


def corpus(folder: Path, count: int) -> tuple[Path, list[str]]:
    lines = (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:count]
    path = folder / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    queries = [
        json.loads(line)["text"]
        for line in (DATA / "queries.jsonl").read_text(encoding="utf-8").splitlines()[:200]
    ]
    return path, queries


def llm_config(base_url: str, concurrency: int) -> str:
    """A knowledge base's config for an LLM ingest against the loopback server."""
    return (
        f"models:\n  llm: openai/gpt-4o-mini\n  llm_api_base: {base_url}\n"
        f"  llm_api_key: k\n  llm_concurrency: {concurrency}\n"
    )


def articles(folder: Path) -> Path:
    """squad-dev's paragraphs joined back into their Wikipedia articles (24 documents of
    ~8k tokens): the document shape Anthropic priced contextual retrieval on."""
    joined: dict[str, list[str]] = {}
    for line in (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        joined.setdefault(row.get("title", ""), []).append(row["text"])
    path = folder / "articles.jsonl"
    rows = [{"_id": t, "title": t, "text": "\n\n".join(ps)} for t, ps in joined.items()]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def payload_bytes(kb: KnowledgeBase) -> tuple[int, int]:
    """JSON bytes of the match points' payloads as stored, and as they would be with the
    chunk's own fields copied into every point (the layout before carrier points)."""
    points = [hit.payload for hit in kb.store.scroll("default", {"record": "match"})]
    carriers = {p["chunk_id"]: p for p in points if "content" in p}
    copied = [{**p, **{f: carriers[p["chunk_id"]][f] for f in CHUNK_FIELDS}} for p in points]
    return sum(len(json.dumps(p)) for p in points), sum(len(json.dumps(p)) for p in copied)


def timed(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run([str(FLEXMATCH), *args], capture_output=True, check=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="flexmatch-bench-"))
    path, queries = corpus(work, args.docs)
    rows: list[tuple[str, str]] = []
    embedder = OnnxEmbedder()

    # offline ingest (no LLM) against raw encode of the same texts, in the same run
    offline = work / "offline"
    with KnowledgeBase.open(offline, embedder=embedder, env={}) as kb:
        report = kb.ingest([path])
        texts = [
            m.text
            for record in kb.list_documents()
            for chunk in kb.get_document(record.id).chunks
            for m in chunk.matching_texts
        ]
        started = time.perf_counter()
        embedder.embed(texts)
        encode_rate = len(texts) / (time.perf_counter() - started)
        ingest_rate = report.matching_texts / report.seconds
        stats = kb.stats()
        payload, copied = payload_bytes(kb)
    rows += [
        ("offline ingest", f"{ingest_rate:.0f} texts/s vs raw encode {encode_rate:.0f} texts/s "
         f"({ingest_rate / encode_rate:.0%})"),
        ("store on disk", f"{stats.store_bytes or 0:,} bytes, {stats.chunks} chunks, "
         f"{stats.matching_texts} points: {(stats.store_bytes or 0) / stats.chunks:,.0f} B/chunk"),
        ("payload per chunk", f"{payload / stats.chunks:,.0f} bytes of JSON; "
         f"{copied / stats.chunks:,.0f} with the chunk copied into every point"),
    ]  # fmt: skip

    # in-process query latency at 1k / 10k / 100k points (see bench/scale.py)
    for folder in scale.build(embedder).values():
        with KnowledgeBase.open(folder, embedder=embedder, env={}) as kb:
            points = kb.stats().matching_texts
            for query in queries[:5]:  # warm: the model, the store's pages
                kb.query(query)
            latencies = []
            for query in queries:
                started = time.perf_counter()
                kb.query(query)
                latencies.append((time.perf_counter() - started) * 1000)
        ordered = sorted(latencies)
        rows.append(
            (f"query at {points:,} points", f"p50 {statistics.median(ordered):.1f} ms, "
             f"p95 {ordered[int(0.95 * len(ordered))]:.1f} ms ({len(ordered)} queries)")
        )  # fmt: skip

    # cold CLI on that knowledge base
    helps = sorted(timed("--help") for _ in range(5))
    cold = sorted(timed("query", "--kb", str(offline), queries[0]) for _ in range(5))
    rows += [
        ("flexmatch --help", f"median {helps[2]:.2f} s (5 runs)"),
        ("cold flexmatch query", f"median {cold[2]:.2f} s (5 runs)"),
    ]

    # LLM ingest against a loopback server with injected latency, and the bound it allows
    with FakeLLMServer() as server:
        server.latency = args.latency
        llm_kb = work / "llm"
        llm_kb.mkdir()
        config = llm_config(server.base_url, args.concurrency)
        (llm_kb / "flexmatch.yaml").write_text(config, encoding="utf-8")
        with KnowledgeBase.open(llm_kb, embedder=embedder, env={}) as kb:
            estimate = kb.run_sync(kb.aestimate([path]))
            whole = kb.run_sync(kb.aestimate([articles(work)]))
            started, cpu_started = time.perf_counter(), time.process_time()
            report = kb.ingest([path])
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu_started  # this process's, the server's included
    bound = report.usage.calls * args.latency / args.concurrency
    cores = len(os.sched_getaffinity(0))
    rows += [
        (f"LLM ingest ({args.docs} docs)", f"{wall:.1f} s for {report.usage.calls} calls; "
         f"bound {bound:.1f} s ({wall / bound:.2f}x the bound)" if bound else f"{wall:.1f} s"),
        ("LLM ingest CPU", f"{cpu:.1f} core-seconds: {cpu / cores:.1f} s on {cores} cores "
         "even if every cycle were used"
         + (f" ({cpu / cores / bound:.2f}x the bound)" if bound else "")),
        ("LLM calls per chunk", f"{report.llm_calls_per_chunk:.3f} ({report.chunks} chunks)"),
        ("LLM cost, measured", f"{report.usage.prompt_tokens:,} prompt + "
         f"{report.usage.completion_tokens:,} completion tokens = "
         f"${report.cost_per_million_document_tokens} per 1M document tokens (gpt-4o-mini)"),
    ]  # fmt: skip
    for name, shown in (("paragraphs", estimate), ("articles", whole)):
        rows.append(
            (f"estimate, squad-dev {name}", f"{shown.documents} docs, {shown.chunks} chunks, "
             f"{shown.llm_calls} calls: ${shown.cost_usd:.4f} for {shown.document_tokens:,} "
             f"document tokens = ${shown.cost_per_million_document_tokens} per 1M (gpt-4o-mini; "
             "answers at their full length budget, no prompt caching)")
        )  # fmt: skip
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
