"""Does feedback teach retrieval? The squad-dev split of ``oracle_questions`` (per
paragraph, its questions sorted by id: even positions served, odd positions asked):

1. ingest the paragraphs into an offline-default knowledge base (no LLM) and score the
   asked half (nDCG@10, as ``flexmatch eval`` scores);
2. start a real ``flexmatch serve`` on it and send each served question as *helpful*
   feedback on its paragraph's chunk, over HTTP (``POST /v1/feedback``, a key with the
   ``feedback`` permission), as an agent that used that passage would;
3. stop the server, score the asked half again.

    .venv/bin/python bench/feedback_learning.py [--data ../shared/data/squad-dev]
        [--work /tmp/feedback-bench] [--limit N]

The knowledge base's ``feedback.per_minute`` is lifted for the run (one client sends
thousands of marks); everything else is the shipped default.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.oracle_questions import load_split  # noqa: E402
from flexmatch.evaluation import BeirDataset, Scores, evaluate  # noqa: E402
from flexmatch.knowledge_base import KnowledgeBase  # noqa: E402
from flexmatch.service import KeyStore  # noqa: E402

CONFIG = "feedback:\n  per_minute: 100000\n"


def scores(folder: Path, dataset: BeirDataset) -> Scores:
    with KnowledgeBase.open(folder) as kb:
        asyncio.run(evaluate(kb, dataset, limit=20))  # warm: the model, the store's pages
        return asyncio.run(evaluate(kb, dataset))


def chunks_of(folder: Path) -> dict[str, list[str]]:
    """Each paragraph's chunk ids (a paragraph is a document of the corpus)."""
    with KnowledgeBase.open(folder) as kb:
        return {r.id: [c.id for c in kb.get_document(r.id).chunks] for r in kb.list_documents()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def send_feedback(folder: Path, served: dict[str, list[str]], chunks: dict[str, list[str]]) -> int:
    """Every served question as helpful feedback on its paragraph's first chunk, through
    a real ``flexmatch serve``; the number of marks sent."""
    _, token = KeyStore.for_kb(folder).create("default", "read,feedback", "bench")
    port = free_port()
    command = [
        *(str(Path(sys.executable).with_name("flexmatch")), "serve", "--kb", str(folder)),
        *("--port", str(port), "--rate", "0"),
    ]
    server = subprocess.Popen(
        command, env={**os.environ}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    sent = 0
    try:
        url = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
            deadline = time.monotonic() + 180
            while True:
                try:
                    if client.get("/health/ready").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("flexmatch serve did not become ready")
                time.sleep(0.5)
            for paragraph, questions in served.items():
                chunk_ids = chunks.get(paragraph)
                if not chunk_ids:
                    continue
                for question in questions:
                    body = {"query": question, "chunk_id": chunk_ids[0], "helpful": True}
                    answer = client.post("/v1/feedback", json=body)
                    if answer.status_code != 200:
                        raise SystemExit(f"feedback refused: {answer.status_code} {answer.text}")
                    sent += 1
    finally:
        server.terminate()
        server.wait(timeout=60)
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared/data/squad-dev")
    parser.add_argument("--work", type=Path, default=Path("/tmp/feedback-bench"))
    parser.add_argument("--limit", type=int, default=None, help="only the first N paragraphs")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    split = load_split(args.data, args.limit, args.work / "split")
    dataset = BeirDataset(corpus=split.corpus, queries=split.asked["eval"], qrels=split.qrels)
    folder = args.work / "kb"
    folder.mkdir(parents=True)
    (folder / "flexmatch.yaml").write_text(CONFIG, encoding="utf-8")
    started = time.perf_counter()
    with KnowledgeBase.open(folder) as kb:
        report = kb.ingest([split.corpus])
    print(f"ingested {report.chunks} chunks in {time.perf_counter() - started:.0f} s", flush=True)
    chunks = chunks_of(folder)
    several = sum(1 for ids in chunks.values() if len(ids) > 1)
    offline = scores(folder, dataset)
    started = time.perf_counter()
    sent = send_feedback(folder, split.served["eval"], chunks)
    took = time.perf_counter() - started
    print(f"sent {sent} helpful marks over HTTP in {took:.0f} s ({several} multi-chunk paragraphs)")
    learned = scores(folder, dataset)
    print(f"\n{len(split.paragraphs)} paragraphs, {len(dataset.queries)} asked questions")
    print(f"{'setup':<28}{'nDCG@10':>9}{'R@10':>8}{'MRR@10':>8}")
    for name, s in (("offline default", offline), ("after helpful feedback", learned)):
        print(f"{name:<28}{s.ndcg_at_10:>9.4f}{s.recall_at_10:>8.4f}{s.mrr_at_10:>8.4f}")
    print(f"{'difference':<28}{learned.ndcg_at_10 - offline.ndcg_at_10:>+9.4f}")


if __name__ == "__main__":
    main()
