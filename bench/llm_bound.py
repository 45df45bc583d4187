"""Where an LLM ingest's time goes, against its calls' bound (calls x latency / concurrency):
the LLM client alone (the same number of calls, nothing else), the ingest with an embedder
that costs nothing, and the ingest as it is; alternating in one run, each with the CPU
time the process spent (the loopback server's included).

Run:  .venv/bin/python bench/llm_bound.py [--docs 200] [--latency 0.3] [--rounds 3]
      [--config "ingest: {document_concurrency: 32}"]   (YAML added to the KB's config)
      [--niceness 0]   (how far below the process bulk embedding runs; default 10)
Not a test: figures vary with the machine's load; compare the variants' ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from run import corpus, llm_config  # bench/run.py: squad-dev paragraphs, the LLM config

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder, threads
from flexmatch.engine.llm import LLM
from flexmatch.testing import FakeLLMServer


class FreeEmbedder:
    """Unit vectors that cost nothing to make: the ingest without the model's CPU."""

    def __init__(self, like: OnnxEmbedder) -> None:
        self.name = like.name
        self.dimension = like.dimension
        self._random = np.random.default_rng(0)

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = self._random.standard_normal((len(texts), self.dimension))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors.tolist()


def ingest(
    folder: Path, path: Path, embedder: object, server: FakeLLMServer, args: argparse.Namespace
) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and LLM calls of one LLM ingest into a new knowledge base."""
    folder.mkdir()
    text = llm_config(server.base_url, args.concurrency) + args.config + "\n"
    (folder / "flexmatch.yaml").write_text(text, encoding="utf-8")
    with KnowledgeBase.open(folder, embedder=embedder, env={}) as kb:  # type: ignore[arg-type]
        started, cpu = time.perf_counter(), time.process_time()
        report = kb.ingest([path])
        return time.perf_counter() - started, time.process_time() - cpu, report.usage.calls


def client_alone(
    server: FakeLLMServer, calls: int, concurrency: int, round_: int
) -> tuple[float, float, int]:
    """The same number of calls through the LLM client, all ready at once."""
    llm = LLM("openai/gpt-4o-mini", api_base=server.base_url, api_key="k", concurrency=concurrency)

    async def run() -> None:
        prompts = [f"Round {round_}, call {n}: write questions." for n in range(calls)]
        await asyncio.gather(*(llm.complete(prompt) for prompt in prompts))

    started, cpu = time.perf_counter(), time.process_time()
    asyncio.run(run())
    return time.perf_counter() - started, time.process_time() - cpu, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--config", default="", help="YAML added to the knowledge bases' config")
    parser.add_argument("--niceness", type=int, default=threads.BULK_NICENESS)
    args = parser.parse_args()
    threads.BULK_NICENESS = args.niceness  # before the run threads start
    work = Path(tempfile.mkdtemp(prefix="flexmatch-bound-"))
    path, _ = corpus(work, args.docs)
    embedder = OnnxEmbedder()
    embedder.embed(["load the model before anything is timed"])
    free = FreeEmbedder(embedder)
    results: dict[str, list[tuple[float, float, int]]] = {}
    with FakeLLMServer() as server:
        server.latency = args.latency
        client_alone(server, 8, args.concurrency, -1)  # litellm imported and warm
        for round_ in range(args.rounds):
            real = ingest(work / f"real-{round_}", path, embedder, server, args)
            nothing = ingest(work / f"free-{round_}", path, free, server, args)
            alone = client_alone(server, real[2], args.concurrency, round_)
            for name, result in (
                ("LLM client alone", alone),
                ("ingest, embedder costing nothing", nothing),
                ("ingest", real),
            ):
                results.setdefault(name, []).append(result)
    cores = len(os.sched_getaffinity(0))
    print(f"{args.docs} docs, latency {args.latency} s, {args.concurrency} calls at once, "
          f"{cores} cores; medians of {args.rounds} rounds")  # fmt: skip
    for name, runs in results.items():
        ratios = [wall / (calls * args.latency / args.concurrency) for wall, _, calls in runs]
        wall = statistics.median(w for w, _, _ in runs)
        cpu = statistics.median(c for _, c, _ in runs)
        calls = statistics.median(n for _, _, n in runs)
        print(f"{name:<34} {statistics.median(ratios):.2f}x the bound "
              f"(all {', '.join(f'{r:.2f}' for r in ratios)}); {wall:.2f} s for {calls:.0f} "
              f"calls; CPU {cpu:.1f} core-s = {cpu / cores:.2f} s on {cores} cores")  # fmt: skip


if __name__ == "__main__":
    main()
