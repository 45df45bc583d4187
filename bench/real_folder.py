"""Offline ingest of a real folder, setups side by side: what each costs and keeps.

A seeded sample of this machine's files is copied into one folder: /usr/share/doc (text,
.gz changelogs, HTML), English man pages (/usr/share/man/man*, .gz) and Python
standard-library modules, plus every file bench/real_folder_questions.yaml asks about
(questions written by reading those files, before any query). Each setup ingests that
folder in a fresh interpreter (so its peak RSS is its own), then answers the questions.

Printed per setup: ingest seconds, documents, chunks, texts embedded, peak RSS of the
child process, the knowledge-base folder on disk (``du``: real and apparent), and quality:
the right file first (file@1), the right file in the top 5, and the top result holding the
answer string. A BM25 baseline over 1,000-character chunks of the same parsed text is
printed for reference (no embedding at all).

Run:  nice -n 10 .venv/bin/python bench/real_folder.py [--docs 400] [--man 100]
          [--stdlib 60] [--seed 0] [--setup default --setup sentence-windows ...]
          [--rounds 2] [--llamaindex] [--keep DIR]
A setup is a matching-text chain name (``sentences``, ``packed-sentences``,
``sentence-windows``, ``content``; ``default``: the config's default) or a YAML config
fragment. ``--llamaindex`` also runs LlamaIndex's offline pipeline on the same files'
text (bench/llamaindex_folder.py, in bench/.venv-llamaindex from bench/setup-llamaindex).
Not a test: figures vary with the machine's load; compare setups of one run.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

BENCH = Path(__file__).resolve().parent
QUESTIONS = BENCH / "real_folder_questions.yaml"
DOC_SUFFIXES = {"", ".gz", ".html", ".htm", ".txt", ".md", ".rst", ".Debian", ".source"}


# -- the sample ----------------------------------------------------------------------------
def _candidates() -> dict[str, list[Path]]:
    """Every file each part may draw from, sorted (so a seed picks the same files)."""
    docs = [
        p
        for p in sorted(Path("/usr/share/doc").rglob("*"))
        if p.is_file()
        and not p.is_symlink()
        and p.stat().st_size >= 200
        and (p.suffix in DOC_SUFFIXES or p.name.endswith((".txt.gz", ".md.gz", ".html.gz")))
    ]
    man = sorted(
        p
        for p in Path("/usr/share/man").glob("man[1-8]/*.gz")
        if p.is_file() and not p.is_symlink()
    )
    stdlib_dir = Path(sysconfig.get_paths()["stdlib"])
    stdlib = sorted(
        p
        for p in stdlib_dir.rglob("*.py")
        if "test" not in p.relative_to(stdlib_dir).parts[0]
        and "site-packages" not in p.parts
        and p.stat().st_size >= 200
    )
    return {"doc": docs, "man": man, "stdlib": stdlib}


def _place(path: Path) -> str:
    """Where ``path`` goes in the corpus folder: doc/..., man/..., stdlib/..."""
    stdlib_dir = Path(sysconfig.get_paths()["stdlib"])
    if path.is_relative_to("/usr/share/doc"):
        return "doc/" + str(path.relative_to("/usr/share/doc"))
    if path.is_relative_to("/usr/share/man"):
        return "man/" + str(path.relative_to("/usr/share/man"))
    return "stdlib/" + str(path.relative_to(stdlib_dir))


def _source(place: str) -> Path:
    part, rest = place.split("/", 1)
    if part == "doc":
        return Path("/usr/share/doc") / rest
    if part == "man":
        return Path("/usr/share/man") / rest
    return Path(sysconfig.get_paths()["stdlib"]) / rest


def sample(folder: Path, docs: int, man: int, stdlib: int, seed: int) -> list[str]:
    """Copy the seeded sample and every questioned file into ``folder``; their places."""
    rng = random.Random(seed)
    wanted = {q["file"] for q in load_questions()}
    places = set(wanted)
    for part, pool in _candidates().items():
        count = {"doc": docs, "man": man, "stdlib": stdlib}[part]
        places.update(_place(p) for p in rng.sample(pool, min(count, len(pool))))
    for place in sorted(places):
        target = folder / place
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_source(place), target)
    return sorted(places)


def load_questions() -> list[dict[str, str]]:
    return list(yaml.safe_load(QUESTIONS.read_text(encoding="utf-8"))["questions"])


# -- one setup, in a child process -----------------------------------------------------------
def child(corpus: Path, kb_dir: Path, setup: str) -> None:
    """Ingest ``corpus`` into ``kb_dir`` with ``setup``, answer the questions, print JSON."""
    import resource

    from flexmatch import KnowledgeBase
    from flexmatch.config import ChainRef, KBConfig
    from flexmatch.engine.embedders import OnnxEmbedder

    config = KBConfig()
    path = Path(setup)
    if path.is_file():
        config = KBConfig.model_validate(
            {**config.model_dump(mode="json"), **yaml.safe_load(path.read_text())}
        )
    elif setup != "default":
        config.sources["default"].matching_text = ChainRef(chain=setup)
    embedder = OnnxEmbedder()
    embedder.embed(["warm up"] * OnnxEmbedder.BULK)
    with KnowledgeBase.open(kb_dir, config=config, env={}, embedder=embedder) as kb:
        started = time.perf_counter()
        report = kb.ingest([corpus])
        ingest_s = time.perf_counter() - started
        answers = []
        for q in load_questions():
            results = kb.query(q["question"], top_n=5)
            files = [_relative(r.uri, corpus) for r in results]
            answers.append(
                {
                    "file@1": bool(files) and files[0] == q["file"],
                    "file@5": q["file"] in files,
                    "answer@1": bool(results) and _holds(results[0].content, q["answer"]),
                }
            )
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "ingest_s": ingest_s,
                "documents": report.added,
                "failed": report.failed,
                "chunks": report.chunks,
                "texts": report.matching_texts,
                "peak_rss_mb": peak_kb / 1024,
                "answers": answers,
            }
        )
    )


def _relative(uri: str, corpus: Path) -> str:
    text = uri.removeprefix("file://")
    try:
        return str(Path(text).resolve().relative_to(corpus.resolve()))
    except ValueError:
        return text


def _holds(content: str, answer: str) -> bool:
    squash = re.compile(r"\s+")
    return squash.sub(" ", answer.lower()) in squash.sub(" ", content.lower())


def du(folder: Path) -> tuple[float, float]:
    """The folder's disk use and apparent size, in MB."""
    real = subprocess.run(["du", "-sk", str(folder)], capture_output=True, text=True, check=True)
    apparent = subprocess.run(
        ["du", "-sk", "--apparent-size", str(folder)], capture_output=True, text=True, check=True
    )
    return int(real.stdout.split()[0]) / 1024, int(apparent.stdout.split()[0]) / 1024


# -- the BM25 baseline -------------------------------------------------------------------------
def bm25_baseline(corpus: Path, places: list[str]) -> dict[str, float]:
    """BM25 (k1 1.2, b 0.75) over 1,000-character chunks of each file's parsed text."""
    from flexmatch.inputs.parsing import parse_file

    chunks: list[tuple[str, str]] = []
    for place in places:
        try:
            text = parse_file(corpus / place).text
        except Exception:
            continue
        chunks.extend((place, text[i : i + 1000]) for i in range(0, len(text), 1000))
    words = re.compile(r"\w+")
    bags = [Counter(words.findall(t.lower())) for _, t in chunks]
    lengths = [sum(b.values()) for b in bags]
    average = sum(lengths) / max(len(lengths), 1)
    frequency: Counter[str] = Counter()
    for bag in bags:
        frequency.update(bag.keys())
    total = len(bags)
    rows = []
    for q in load_questions():
        terms = set(words.findall(q["question"].lower()))
        scores = []
        for index, bag in enumerate(bags):
            score = 0.0
            for term in terms & bag.keys():
                idf = math.log(1 + (total - frequency[term] + 0.5) / (frequency[term] + 0.5))
                tf = bag[term]
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * lengths[index] / average))
            scores.append(score)
        order = sorted(range(total), key=lambda i: -scores[i])[:5]
        files = [chunks[i][0] for i in order]
        rows.append(
            {
                "file@1": files[0] == q["file"],
                "file@5": q["file"] in files,
                "answer@1": _holds(chunks[order[0]][1], q["answer"]),
            }
        )
    return {key: sum(r[key] for r in rows) / len(rows) for key in ("file@1", "file@5", "answer@1")}


# -- LlamaIndex on the same files -------------------------------------------------------------
LLAMAINDEX_PYTHON = BENCH / ".venv-llamaindex" / "bin" / "python"


def llamaindex(corpus: Path, places: list[str], folder: Path) -> dict | None:
    """LlamaIndex's offline pipeline (bench/llamaindex_folder.py) over the same files'
    text, extracted beforehand by FlexMatch's parsers; None without its venv."""
    from flexmatch.inputs.parsing import parse_file

    if not LLAMAINDEX_PYTHON.is_file():
        print("LlamaIndex: bench/.venv-llamaindex is missing (run bench/setup-llamaindex)")
        return None
    rows = []
    for place in places:
        try:
            parsed = parse_file(corpus / place)
        except Exception:
            continue
        rows.append({"_id": place, "title": parsed.title or place, "text": parsed.text})
    extracted = folder / "extracted.jsonl"
    extracted.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    done = subprocess.run(
        [str(LLAMAINDEX_PYTHON), str(BENCH / "llamaindex_folder.py"), str(extracted)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print(f"LlamaIndex: failed\n{done.stderr[-2000:]}")
        return None
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# -- the orchestrator --------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=400, help="files of /usr/share/doc")
    parser.add_argument("--man", type=int, default=100, help="man pages")
    parser.add_argument("--stdlib", type=int, default=60, help="standard-library modules")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--setup", action="append", help="chain name or config YAML")
    parser.add_argument("--rounds", type=int, default=1, help="ingests per setup, alternating")
    parser.add_argument("--keep", type=Path, help="build the corpus here and keep it")
    parser.add_argument("--llamaindex", action="store_true", help="also LlamaIndex, same files")
    parser.add_argument(
        "--child", nargs=3, metavar=("CORPUS", "KB", "SETUP"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        corpus, kb_dir, setup = args.child
        child(Path(corpus), Path(kb_dir), setup)
        return
    setups = args.setup or ["default", "packed-sentences", "sentence-windows"]
    work = Path(tempfile.mkdtemp(prefix="flexmatch-real-"))
    corpus = args.keep or work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    places = sample(corpus, args.docs, args.man, args.stdlib, args.seed)
    size = sum((corpus / p).stat().st_size for p in places) / 1e6
    print(f"{len(places)} files ({size:.1f} MB on disk) in {corpus}", flush=True)
    results: dict[str, list[dict]] = {s: [] for s in setups}
    other: list[dict] = []
    for round_ in range(args.rounds):
        if args.llamaindex and (found := llamaindex(corpus, places, work)) is not None:
            other.append(found)
            print(f"round {round_ + 1} llamaindex: {json.dumps(found)}", flush=True)
        for setup in setups:
            kb_dir = work / f"kb-{len(results[setup])}-{re.sub(r'[^A-Za-z0-9]+', '-', setup)}"
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(corpus), str(kb_dir), setup],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                print(f"{setup}: failed\n{done.stderr[-3000:]}", flush=True)
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["disk_mb"], row["apparent_mb"] = du(kb_dir)
            shutil.rmtree(kb_dir, ignore_errors=True)
            results[setup].append(row)
            brief = {k: v for k, v in row.items() if k != "answers"}
            print(f"round {round_ + 1} {setup}: {json.dumps(brief)}", flush=True)
    print()
    print(
        "| setup | ingest s | docs | chunks | texts embedded | peak RSS MB | KB disk MB "
        "(du / apparent) | file@1 | file@5 | answer@1 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for setup, rows in results.items():
        if not rows:
            continue
        seconds = sorted(r["ingest_s"] for r in rows)[len(rows) // 2]
        last = rows[-1]
        quality = {
            key: sum(a[key] for a in last["answers"]) / len(last["answers"])
            for key in ("file@1", "file@5", "answer@1")
        }
        print(
            f"| {setup} | {seconds:.1f} | {last['documents']} | {last['chunks']} | "
            f"{last['texts']} | {last['peak_rss_mb']:.0f} | {last['disk_mb']:.1f} / "
            f"{last['apparent_mb']:.1f} | {quality['file@1']:.2f} | {quality['file@5']:.2f} | "
            f"{quality['answer@1']:.2f} |"
        )
    if other:
        seconds = sorted(r["pipeline_s"] for r in other)[len(other) // 2]
        print(
            f"| LlamaIndex (SentenceSplitter, same MiniLM on torch; text extracted beforehand) "
            f"| {seconds:.1f} | {other[-1]['documents']} | {other[-1]['nodes']} | "
            f"{other[-1]['nodes']} | {other[-1]['peak_rss_mb']:.0f} | | | | |"
        )
    base = bm25_baseline(corpus, places)
    print(
        f"| BM25 over 1,000-char chunks | — | | | 0 | | | {base['file@1']:.2f} | "
        f"{base['file@5']:.2f} | {base['answer@1']:.2f} |"
    )
    print(f"\n{len(load_questions())} questions, {len(places)} files, seed {args.seed}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
