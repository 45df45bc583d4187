"""Ingest throughput on Ray against an LLM-latency-bound loopback server: a local run, then
1 and 2 Ray workers, on the same squad-dev documents with the LLM chains (questions,
context) answered by the fake LLM server after an injected latency.

Each run has its own knowledge base (no LLM cache shared between runs), and each worker
its own LLM concurrency (``models.llm_concurrency``), so 2 workers may have twice the
calls in flight: the bound below is calls x latency / (concurrency x workers). Each chain
asks about one chunk per call (``--chunks-per-call``), as with long documents, so the
run waits on the LLM rather than on this machine's CPU.

Run:  .venv/bin/python bench/ray_ingest.py [--docs 32] [--latency 1.0] [--concurrency 2]

The defaults keep the LLM the bottleneck even on a small, busy machine: with no latency
at all, 60 documents take ~10 s of CPU here (LLM client overhead, embedding), which 2
workers on 2 shared cores do not shorten.
Not a test: figures vary with the machine's load; compare ratios, run it twice.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import ray
from run import corpus, llm_config  # bench/run.py: squad-dev paragraphs, the LLM config

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.ingest.fanout import NAMESPACE
from flexmatch.testing import FakeLLMServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=32)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=2, help="LLM calls per process")
    parser.add_argument("--chunks-per-call", type=int, default=1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="flexmatch-ray-bench-"))
    path, _ = corpus(work, args.docs)
    embedder = OnnxEmbedder()
    embedder.embed(["warm up"])  # the local run should not pay for loading the model
    rows: list[tuple[str, float, float, int, int, float]] = []
    per_call = args.chunks_per_call
    with FakeLLMServer() as server:
        server.latency = args.latency
        config = llm_config(server.base_url, args.concurrency) + (
            "sources:\n  default:\n"
            f"    matching_text: {{chain: questions, params: {{chunks_per_call: {per_call}}}}}\n"
            f"    qualifying_text: {{chain: context, params: {{chunks_per_call: {per_call}}}}}\n"
        )

        def ingest(name: str, **ray_options: object) -> None:
            folder = work / name
            folder.mkdir()
            (folder / "flexmatch.yaml").write_text(config, encoding="utf-8")
            with KnowledgeBase.open(folder, embedder=embedder, env={}) as kb:
                started = time.perf_counter()
                report = kb.ingest([path], **ray_options)
                wall = time.perf_counter() - started
            assert not report.failed, report.failed
            workers = int(ray_options.get("workers", 1))  # type: ignore[call-overload]
            bound = report.usage.calls * args.latency / (args.concurrency * workers)
            rows.append((name, wall, report.seconds, report.added, report.usage.calls, bound))
            print(f"{name}: {wall:.1f} s", flush=True)

        ingest("local")
        started = time.perf_counter()
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
            namespace=NAMESPACE,
        )
        cluster = time.perf_counter() - started
        try:
            ingest("ray, 1 worker", ray=True, workers=1)
            ingest("ray, 2 workers", ray=True, workers=2)
        finally:
            ray.shutdown()
    print(
        f"\n{args.docs} squad-dev documents, LLM latency {args.latency} s, "
        f"llm_concurrency {args.concurrency} per process, {per_call} chunk(s) per call; "
        "local Ray cluster started in "
        f"{cluster:.1f} s (not counted below)\n"
    )
    print("| run | wall s (incl. worker start) | ingest s | docs/s | LLM calls | bound s |")
    print("|---|---|---|---|---|---|")
    for name, wall, seconds, added, calls, bound in rows:
        print(
            f"| {name} | {wall:.1f} | {seconds:.1f} | {added / seconds:.1f} | {calls} "
            f"| {bound:.1f} |"
        )


if __name__ == "__main__":
    main()
