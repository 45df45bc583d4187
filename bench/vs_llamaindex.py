"""LlamaIndex's IngestionPipeline against FlexMatch's LLM ingest, on the same documents.

Both sides ask one loopback fake OpenAI-compatible server (injected latency) for questions
about each chunk and embed with the same all-MiniLM-L6-v2. Rounds alternate (llamaindex,
flexmatch, llamaindex, ...) because the machine is shared and noisy: a slow spell then
hurts both sides rather than one. Each round is a fresh interpreter (LlamaIndex in its
own venv, bench/setup-llamaindex; FlexMatch in .venv, bench/flexmatch_ingest.py), so the
fake server, in this process, shares its interpreter with neither; a side's figure is its
pipeline alone (``IngestionPipeline.run``, ``kb.ingest``), imports and model load
reported apart.

Run:  bench/setup-llamaindex   (once)
      .venv/bin/python bench/vs_llamaindex.py [--docs 200] [--latency 0.3]
                                              [--concurrency 8] [--rounds 3]
                                              [--torch-threads 2]
Not a test: figures vary with the machine's load; compare the medians' ratio.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from flexmatch.config import default_embedding_model
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import default_responder

BENCH = Path(__file__).resolve().parent
DATA = BENCH.parents[1] / "shared" / "data" / "squad-dev"
LLAMAINDEX_PYTHON = BENCH / ".venv-llamaindex" / "bin" / "python"
LLAMAINDEX_SCRIPT = BENCH / "llamaindex_ingest.py"
FLEXMATCH_SCRIPT = BENCH / "flexmatch_ingest.py"

# LlamaIndex's QuestionsAnsweredExtractor prompt: "Here is the context:\n...\n\nGiven the
# contextual information, generate 5 questions ..."
_LLAMAINDEX_PROMPT = re.compile(
    r"Here is the context:\n(.*?)\n\nGiven the contextual information, generate (\d+) questions",
    re.DOTALL,
)


@dataclass
class Round:
    side: str
    seconds: float  # the ingest alone
    calls: int  # chat completions the server saw during it
    failed_calls: int  # of those, answered with a non-2xx status
    chunks: int
    note: str


def responder(messages: list[dict]) -> str:
    """Answer LlamaIndex's question prompt with N questions, as FlexMatch's gets answered.

    The fake's default answers prompts it does not know with "OK"; LlamaIndex embeds the
    questions with each chunk, so a real-sized answer keeps its embedding work honest.
    Every other prompt (all of FlexMatch's) gets the default answer.
    """
    prompt = "\n".join(str(m.get("content") or "") for m in messages)
    found = _LLAMAINDEX_PROMPT.search(prompt)
    if found is None:
        return default_responder(messages)
    context, count = found.group(1), int(found.group(2))
    sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n+", context) if len(s.split()) > 2]
    return "\n".join(
        f"{i}. What does the text say about {' '.join(s.split()[:8]).rstrip('.,;:!?')}?"
        for i, s in enumerate(sentences[:count], 1)
    )


def corpus(folder: Path, count: int) -> Path:
    """The first ``count`` lines of squad-dev's corpus, the one file both sides read."""
    lines = (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:count]
    path = folder / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def counts(server: FakeLLMServer) -> tuple[int, int]:
    """Chat completions so far and how many failed: a round's figures are differences."""
    return server.calls(), server.calls() - server.successful_calls()


def llamaindex_round(server: FakeLLMServer, path: Path, concurrency: int, threads: int) -> Round:
    """One fresh interpreter per round, as a LlamaIndex user's script would be."""
    calls, failed = counts(server)
    started = time.perf_counter()
    command = [str(LLAMAINDEX_PYTHON), str(LLAMAINDEX_SCRIPT), str(path)]
    command += ["--base-url", server.base_url, "--concurrency", str(concurrency)]
    command += ["--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    process = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"the LlamaIndex side failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    calls_after, failed_after = counts(server)
    return Round(
        side="llamaindex",
        seconds=result["pipeline_s"],
        calls=calls_after - calls,
        failed_calls=failed_after - failed,
        chunks=result["nodes"],
        note=f"imports {result['import_s']:.1f} s, model load {result['load_s']:.1f} s, "
        f"whole process {process:.1f} s, {result['points']} points",
    )


def flexmatch_round(
    server: FakeLLMServer, path: Path, concurrency: int, embedding: str | None
) -> Round:
    """As bench/run.py's LLM ingest, in a fresh interpreter like the LlamaIndex side."""
    calls, failed = counts(server)
    started = time.perf_counter()
    command = [sys.executable, str(FLEXMATCH_SCRIPT), str(path)]
    command += ["--base-url", server.base_url, "--concurrency", str(concurrency)]
    command += ["--embedding", embedding] if embedding else []
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    process = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"the FlexMatch side failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    calls_after, failed_after = counts(server)
    return Round(
        side="flexmatch",
        seconds=result["pipeline_s"],
        calls=calls_after - calls,
        failed_calls=failed_after - failed,
        chunks=result["chunks"],
        note=f"imports {result['import_s']:.1f} s, model load {result['load_s']:.1f} s, "
        f"whole process {process:.1f} s, {result['matching_texts']} matching texts",
    )


def alternate(args: argparse.Namespace, work: Path) -> list[Round]:
    """llamaindex, flexmatch, llamaindex, ... against one fake server; each round printed."""
    path = corpus(work, args.docs)
    rounds: list[Round] = []
    with FakeLLMServer() as server:
        server.latency = args.latency
        server.responder = responder
        for number in range(1, args.rounds + 1):
            rounds.append(llamaindex_round(server, path, args.concurrency, args.torch_threads))
            rounds.append(flexmatch_round(server, path, args.concurrency, args.embedding))
            for done in rounds[-2:]:
                print(
                    f"round {number}  {done.side:<10}  {done.seconds:6.1f} s  "
                    f"{done.calls:4d} calls ({done.failed_calls} failed)  "
                    f"{done.chunks:4d} chunks  {done.note}",
                    flush=True,
                )
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side")
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=2,
        help="LlamaIndex's torch intra-op threads (FlexMatch's model: every core for a batch)",
    )
    parser.add_argument(
        "--embedding",
        help="FlexMatch's local model (default: the machine's, int8 where the CPU has VNNI); "
        "local/all-MiniLM-L6-v2 is fp32, as LlamaIndex's",
    )
    args = parser.parse_args()
    if not LLAMAINDEX_PYTHON.is_file():
        sys.exit(f"{LLAMAINDEX_PYTHON} is missing: run bench/setup-llamaindex first")
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(
        f"docs {args.docs}, latency {args.latency} s, concurrency {args.concurrency}, "
        f"rounds {args.rounds} per side, LlamaIndex torch threads {args.torch_threads}, "
        f"FlexMatch model {args.embedding or default_embedding_model()}\n"
    )

    with tempfile.TemporaryDirectory(prefix="flexmatch-vs-llamaindex-") as folder:
        rounds = alternate(args, Path(folder))

    print()
    medians: dict[str, float] = {}
    for side in ("llamaindex", "flexmatch"):
        mine = [r for r in rounds if r.side == side]
        medians[side] = statistics.median(r.seconds for r in mine)
        calls = statistics.median(r.calls for r in mine)
        bound = calls * args.latency / args.concurrency
        print(
            f"{side:<10}  median {medians[side]:6.1f} s  "
            f"({', '.join(f'{r.seconds:.1f}' for r in mine)})  {calls:.0f} calls a round, "
            f"latency bound {bound:.1f} s"
        )
    ratio = medians["llamaindex"] / medians["flexmatch"]
    print(f"llamaindex / flexmatch median wall time: {ratio:.2f}x")


if __name__ == "__main__":
    main()
