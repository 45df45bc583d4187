"""Deep search on multi-hop questions: does the passage the question never names reach
the top 5?

Every question's paragraphs are pooled into one corpus (deduplicated by title and text;
one document a paragraph, its title the document's title), ingested once with the
offline defaults, and each question is searched ``fast`` (one search) and ``deep`` (the
first results seed follow-up searches), offline (the ``seeds`` follow-ups: names and
titles of the first results) and, with ``--llm``, with the fake OpenAI-compatible server
of ``flexmatch.testing`` writing the follow-ups (``decompose``; its answers are a
deterministic stand-in, so that row measures the path and its cost, not a model).

A seeded split puts ~30% of the questions in a "tuned on" part (the settings were chosen
on it) and the rest in a "judged on" part; both are reported, per question type too.

Run:  nice -n 10 .venv/bin/python bench/multihop.py [--data PATH] [--llm] [--limit N]
The data (one JSON a line: id, question, answer, type, paragraphs[{title, text,
supporting}]) is not part of the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from flexmatch import Document, Element, KnowledgeBase
from flexmatch.config import ChainRef, KBConfig, load_config
from flexmatch.engine.embedders import Embedder, make_embedder

DEFAULT_DATA = Path("/work/data/multihop/normalized.jsonl")
DEFAULT_KB = Path("/tmp/flexmatch-bench-multihop-content")
TUNE_SHARE = 0.3
SEED = 7


def load(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        sys.exit(
            f"no multi-hop data at {path}: pass --data PATH (a JSON-lines file: id, "
            "question, answer, type, paragraphs[{title, text, supporting}])"
        )
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def paragraph_id(title: str, text: str) -> str:
    return "p-" + hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()[:16]


def corpus(questions: list[dict[str, Any]]) -> list[Document]:
    """Every question's paragraphs, once each."""
    seen: dict[str, Document] = {}
    for q in questions:
        for p in q["paragraphs"]:
            key = paragraph_id(p["title"], p["text"])
            if key not in seen:
                seen[key] = Document(
                    id=key,
                    uri=f"{key}.txt",
                    source="default",
                    title=p["title"],
                    elements=[Element(kind="paragraph", text=p["text"])],
                )
    return list(seen.values())


def split(questions: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The "tuned on" and "judged on" parts, by a seeded shuffle."""
    order = sorted(questions, key=lambda q: q["id"])
    random.Random(SEED).shuffle(order)
    cut = round(len(order) * TUNE_SHARE)
    return order[:cut], order[cut:]


def measure(kb: KnowledgeBase, questions: list[dict[str, Any]], depth: str) -> list[dict[str, Any]]:
    rows = []
    for q in questions:
        wanted = {paragraph_id(p["title"], p["text"]) for p in q["paragraphs"] if p["supporting"]}
        started = time.perf_counter()
        answer = kb.search(q["question"], top_n=10, depth=depth)  # type: ignore[arg-type]
        ms = (time.perf_counter() - started) * 1000
        found = [r.document_id for r in answer.results]
        cost = answer.cost
        rows.append(
            {
                "type": q.get("type") or "all",
                "all5": wanted <= set(found[:5]),
                "all10": wanted <= set(found[:10]),
                "recall5": len(wanted & set(found[:5])) / len(wanted),
                "ms": ms,
                "searches": cost.searches if cost else 1,
                "llm_calls": cost.llm_calls if cost else 0,
                "tokens": cost.llm_tokens if cost else 0,
            }
        )
    return rows


def summary(rows: list[dict[str, Any]]) -> str:
    n = len(rows)
    ms = sorted(r["ms"] for r in rows)
    p95 = ms[min(n - 1, int(0.95 * n))]
    return (
        f"| {n} | {sum(r['all5'] for r in rows) / n:.3f} | "
        f"{statistics.mean(r['recall5'] for r in rows):.3f} | "
        f"{sum(r['all10'] for r in rows) / n:.3f} | {statistics.median(ms):.0f} / {p95:.0f} | "
        f"{statistics.mean(r['searches'] for r in rows):.1f} | "
        f"{statistics.mean(r['llm_calls'] for r in rows):.1f} / "
        f"{statistics.mean(r['tokens'] for r in rows):.0f} |"
    )


def open_kb(
    folder: Path, embedder: Embedder, llm: str | None, deep: dict[str, Any], matching: str
) -> KnowledgeBase:
    config = load_config(folder) if (folder / "flexmatch.yaml").exists() else KBConfig()
    config.sources["default"].matching_text = ChainRef(chain=matching)
    query = config.query.model_copy(update={"deep": config.query.deep.model_copy(update=deep)})
    update: dict[str, Any] = {"query": query}
    if llm is not None:  # the query side only: the index is the offline one
        models = config.models.model_copy(
            update={"llm": "openai/fake-model", "llm_api_base": llm, "llm_api_key": "x"}
        )
        update["models"] = models
        query = query.model_copy(update={"query_transform": ChainRef(chain="identity")})
        update["query"] = query
    return KnowledgeBase.open(
        folder, config=config.model_copy(update=update), env={}, embedder=embedder
    )


def parse_settings(items: list[str]) -> dict[str, Any]:
    """``--deep max_hops=3 --deep follow_ups.with_question=false`` → query.deep's update."""
    deep: dict[str, Any] = {}
    params: dict[str, Any] = {}
    for item in items:
        key, _, raw = item.partition("=")
        value: Any = json.loads(raw) if raw not in ("", None) else raw
        if key.startswith("follow_ups."):
            params[key.split(".", 1)[1]] = value
        elif key == "follow_ups":
            deep["follow_ups"] = ChainRef(chain=value)
        else:
            deep[key] = value
    if params:
        ref = deep.get("follow_ups", ChainRef(chain="seeds"))
        deep["follow_ups"] = ref.model_copy(update={"params": params})
    return deep


def tune(kb: KnowledgeBase, questions: list[dict[str, Any]], grid: list[str]) -> None:
    """Each deep setting of ``grid`` on the tuned part, back to back, fast first."""
    base = kb.config.query
    print(
        "| setting | questions | all supports in top 5 | recall@5 | all in top 10 "
        "| p50 / p95 ms | searches | LLM calls / tokens |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("| fast " + summary(measure(kb, questions, "fast")), flush=True)
    for item in grid:
        deep = parse_settings(item.split(",") if item else [])
        kb.use_query_config(base.model_copy(update={"deep": base.deep.model_copy(update=deep)}))
        print(f"| deep {item or 'defaults'} " + summary(measure(kb, questions, "deep")), flush=True)
    kb.use_query_config(base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--kb", type=Path, default=DEFAULT_KB, help="where the index is kept")
    parser.add_argument(
        "--limit", type=int, default=None, help="the first N questions of each part"
    )
    parser.add_argument("--llm", action="store_true", help="also deep with the fake LLM server")
    parser.add_argument("--part", choices=["tuned", "judged", "both"], default="both")
    parser.add_argument("--deep", action="append", default=[], help="a query.deep setting")
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        help="tuning: deep settings to compare on the tuned part, e.g. "
        "'seed_results=2,follow_ups.count=3' (repeatable; nothing else is run)",
    )
    parser.add_argument(
        "--matching",
        default="content",
        help="the matching-text chain (content: one vector a paragraph, the title before "
        "it; sentences, the offline default, embeds ~6x as many texts)",
    )
    args = parser.parse_args()
    questions = load(args.data)
    tuned, judged = split(questions)
    parts = {"tuned on": tuned, "judged on": judged}
    if args.part != "both":
        parts = {f"{args.part} on": parts[f"{args.part} on"]}
    if args.limit:
        parts = {name: part[: args.limit] for name, part in parts.items()}
    embedder = make_embedder(KBConfig().models)  # the offline default's model (int8 ONNX)
    documents = corpus(questions)
    deep = parse_settings(args.deep)
    with open_kb(args.kb, embedder, None, deep, args.matching) as kb:
        started = time.perf_counter()
        report = kb.ingest_documents(documents)
        print(
            f"{len(questions)} questions, {len(documents)} paragraphs "
            f"({report.documents} indexed now, {time.perf_counter() - started:.0f} s)",
            flush=True,
        )
        if args.grid:
            tune(kb, tuned[: args.limit] if args.limit else tuned, args.grid)
            return
        modes: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(dict)
        for name, part in parts.items():
            for depth in ("fast", "deep"):
                label = "fast" if depth == "fast" else "deep, offline (seeds)"
                modes[label][name] = measure(kb, part, depth)
                print(f"{label} / {name}: done", flush=True)
    if args.llm:
        from flexmatch.testing import FakeLLMServer

        with (
            FakeLLMServer() as server,
            open_kb(args.kb, embedder, server.base_url, deep, args.matching) as kb,
        ):
            for name, part in parts.items():
                modes["deep, fake LLM (decompose)"][name] = measure(kb, part, "deep")
    print()
    print(
        "| mode | part | type | questions | all supports in top 5 | recall@5 | all in top 10 "
        "| p50 / p95 ms | searches | LLM calls / tokens |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, by_part in modes.items():
        for name, rows in by_part.items():
            print(f"| {label} | {name} | all " + summary(rows))
            types = sorted({r["type"] for r in rows})
            if len(types) > 1:
                for kind in types:
                    print(
                        f"| {label} | {name} | {kind} "
                        + summary([r for r in rows if r["type"] == kind])
                    )
    print(f"\ndata: {args.data}; matching: {args.matching}; deep settings: {deep or 'defaults'}")


if __name__ == "__main__":
    main()
