"""Query latency while the same process ingests: a knowledge base of 200 squad-dev
paragraphs answers questions, first alone, then while another ingests the other 848
(offline chains), both in this process (as in `flexmatch serve`).

Run:  .venv/bin/python bench/query_under_ingest.py [--niceness 0]
      (--niceness: how far below the process bulk embedding runs; default 10)
Not a test: figures vary with the machine's load; compare runs back to back.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from run import DATA, corpus  # bench/run.py: the first N squad-dev paragraphs

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder, threads


def latencies(kb: KnowledgeBase, queries: list[str], until: threading.Event | None) -> list[float]:
    """Milliseconds a query, over ``queries`` (and round again while ``until`` is unset)."""
    taken: list[float] = []
    for n in range(len(queries) if until is None else 1_000_000):
        if until is not None and until.is_set():
            break
        started = time.perf_counter()
        kb.query(queries[n % len(queries)])
        taken.append((time.perf_counter() - started) * 1000)
    return taken


def summary(taken: list[float]) -> str:
    ordered = sorted(taken)
    p95 = ordered[int(0.95 * len(ordered))]
    return f"p50 {statistics.median(ordered):.1f} ms, p95 {p95:.1f} ms ({len(ordered)} queries)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--niceness", type=int, default=threads.BULK_NICENESS)
    args = parser.parse_args()
    threads.BULK_NICENESS = args.niceness  # before the run threads start
    work = Path(tempfile.mkdtemp(prefix="flexmatch-busy-"))
    path, queries = corpus(work, 200)
    more = work / "more.jsonl"
    lines = (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[200:]
    more.write_text("\n".join(lines) + "\n", encoding="utf-8")
    embedder = OnnxEmbedder()
    (work / "served").mkdir()
    (work / "growing").mkdir()
    with KnowledgeBase.open(work / "served", embedder=embedder, env={}) as kb:
        kb.ingest([path])
        latencies(kb, queries[:5], None)  # warm: the model, the store's pages
        alone = latencies(kb, queries, None)
        finished = threading.Event()
        seconds: list[float] = []

        def ingest() -> None:
            try:
                with KnowledgeBase.open(work / "growing", embedder=embedder, env={}) as other:
                    seconds.append(other.ingest([more]).seconds)
            finally:
                finished.set()

        thread = threading.Thread(target=ingest)
        thread.start()
        time.sleep(1.0)  # the ingest under way
        busy = latencies(kb, queries, finished)
        thread.join()
    print(f"bulk embedding {args.niceness} steps below the process")
    print(f"query alone          {summary(alone)}")
    if not seconds:
        raise SystemExit("the ingest failed")
    print(f"query during ingest  {summary(busy)}; the ingest of {len(lines):,} took "
          f"{seconds[0]:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
