"""Code search on FlexMatch's own source: the ``code`` chunker against ``structure`` and
``window``, offline (no LLM), with queries written from the code's docstrings.

Protocol. Every ``*.py`` file under ``--under`` (default ``flexmatch/engine``) is copied
with its docstrings removed (module, class and function docstrings; comments and names
stay), and that copy is indexed. Each function, method or class that had a docstring
gives one query: the docstring's first sentence (at least five words). So the text a query
was taken from is never indexed: a setup has to find the definition from its code, names
and comments, as a developer's question would. A result is relevant when it comes from
the right file and holds the definition's ``def``/``class`` line, or carries its symbol
path as headings (a later piece of a long definition). Metrics: recall@5 (a relevant
chunk in the top 5) and MRR@10.

Every setup uses the same embedding model (all-MiniLM-L6-v2), hybrid retrieval and the
offline reranker; only the chunker and the matching texts differ.

Run:  .venv/bin/python bench/code_eval.py [--under flexmatch] [--setup NAME]... [--limit N]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from flexmatch.config import ChainRef, KBConfig
from flexmatch.engine.chains.matching_text.code import doc_sentences
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.knowledge_base import KnowledgeBase
from flexmatch.models import SearchResult

REPO = Path(__file__).resolve().parents[1]

# label: (chunker, its params, matching-text chain)
SETUPS: dict[str, tuple[str, dict[str, int], str]] = {
    "code chunker + code signatures": ("code", {}, "code-questions"),
    "code chunker, no merging + code signatures": ("code", {"merge_tokens": 0}, "code-questions"),
    "code chunker + sentences": ("code", {}, "questions"),
    "structure chunker + sentences (default)": ("structure", {}, "questions"),
    "structure chunker + code signatures": ("structure", {}, "code-questions"),
    "window chunker + sentences": ("window", {}, "questions"),
}

DEFAULT_SETUPS = [
    "code chunker + code signatures",
    "structure chunker + sentences (default)",
    "window chunker + sentences",
]


@dataclass(frozen=True)
class Query:
    text: str
    file: str  # relative to the indexed folder
    def_line: str  # the definition's first line, whitespace collapsed
    labels: tuple[str, ...]  # its headings: ("class KnowledgeBase", "def ingest")


def _squash(text: str) -> str:
    return " ".join(text.split())


def _label(node: ast.AST) -> str:
    if isinstance(node, ast.ClassDef):
        return f"class {node.name}"
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    return f"{prefix} {node.name}"  # type: ignore[attr-defined]


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def strip_docstrings(source: str) -> tuple[str, list[tuple[Definition, list[str], str]]]:
    """The source without docstrings, and each documented definition with the labels of
    the classes around it and its docstring."""
    tree = ast.parse(source)
    lines = source.split("\n")
    found: list[tuple[Definition, list[str], str]] = []
    drop: list[tuple[int, int, str | None]] = []  # (first, last) line, what replaces them

    def visit(node: ast.AST, labels: list[str]) -> None:
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and _is_docstring(body[0]):
            first, last = body[0].lineno, body[0].end_lineno or body[0].lineno
            indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
            keep = None if len(body) > 1 or isinstance(node, ast.Module) else f"{indent}..."
            drop.append((first, last, keep))
            if isinstance(node, Definition):
                found.append((node, labels, ast.get_docstring(node) or ""))
        inner = [*labels, _label(node)] if isinstance(node, ast.ClassDef) else labels
        for child in ast.iter_child_nodes(node):
            if isinstance(child, Definition):
                visit(child, inner if isinstance(node, ast.ClassDef | ast.Module) else [])
            elif not isinstance(node, Definition):
                visit(child, inner)

    visit(tree, [])
    for first, last, keep in sorted(drop, reverse=True):
        lines[first - 1 : last] = [keep] if keep is not None else []
    return "\n".join(lines), found


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def build_corpus(target: Path, under: str) -> list[Query]:
    """Copy the files under ``under`` without docstrings into ``target``; the queries."""
    queries: list[Query] = []
    for path in sorted((REPO / under).rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        source = path.read_text(encoding="utf-8")
        stripped, documented = strip_docstrings(source)
        copy = target / relative
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(stripped, encoding="utf-8")
        original = source.split("\n")
        for node, labels, doc in documented:
            first = doc_sentences(doc, 1, 5)
            if not first:
                continue
            line = _squash(original[node.lineno - 1])
            labels_path = (*labels, _label(node))
            queries.append(Query(first[0], relative, line, labels_path))
    return queries


def relevant(result: SearchResult, query: Query) -> bool:
    if not result.uri.endswith("/" + query.file):
        return False
    if query.def_line in _squash(result.content):
        return True
    return tuple(result.heading_path[1:]) == query.labels


async def evaluate(kb: KnowledgeBase, queries: list[Query]) -> tuple[float, float, float]:
    hits, reciprocal, latencies = 0, 0.0, []
    for query in queries:
        started = time.perf_counter()
        results = await kb.aquery(query.text, top_n=10)
        latencies.append((time.perf_counter() - started) * 1000)
        rank = next((i for i, r in enumerate(results, start=1) if relevant(r, query)), None)
        if rank is not None:
            hits += rank <= 5
            reciprocal += 1 / rank
    return hits / len(queries), reciprocal / len(queries), statistics.median(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=None, help="evaluate the first N queries")
    parser.add_argument("--setup", action="append", choices=list(SETUPS), help="(repeatable)")
    parser.add_argument(
        "--under", default="flexmatch/engine", help="the folder of the repository to index"
    )
    args = parser.parse_args()
    embedder = OnnxEmbedder()
    work = Path(tempfile.mkdtemp(prefix="flexmatch-code-eval-"))
    try:
        corpus = work / "corpus"
        queries = build_corpus(corpus, args.under)[: args.limit]
        files = sum(1 for _ in corpus.rglob("*.py"))
        print(f"{len(queries)} queries from the docstrings of {files} files", flush=True)
        rows = []
        for label in args.setup or DEFAULT_SETUPS:
            chunker, params, matching = SETUPS[label]
            config = KBConfig()
            source = config.sources["default"]
            source.chunker = ChainRef(chain=chunker, params=params)
            source.matching_text = ChainRef(chain=matching)
            folder = work / label.replace(" ", "-")
            with KnowledgeBase.open(folder, config=config, env={}, embedder=embedder) as kb:
                started = time.perf_counter()
                report = kb.ingest([corpus])
                ingest_s = time.perf_counter() - started
                recall, mrr, median_ms = asyncio.run(evaluate(kb, queries))
            rows.append((label, report.chunks, report.matching_texts, ingest_s, recall, mrr))
            print(
                f"{label}: recall@5 {recall:.3f} MRR@10 {mrr:.3f} chunks {report.chunks} "
                f"ingest {ingest_s:.0f}s query median {median_ms:.0f} ms",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("| setup | chunks | matching texts | ingest s | recall@5 | MRR@10 |")
    print("|---|---|---|---|---|---|")
    for label, chunks, texts, ingest_s, recall, mrr in rows:
        print(f"| {label} | {chunks} | {texts} | {ingest_s:.0f} | {recall:.3f} | {mrr:.3f} |")


if __name__ == "__main__":
    main()
