"""The multi-hop questions of ``bench/multihop.py``, from the KAG project's republished
samples: MuSiQue-Ans (100 dev questions, 100 train questions) and 2 of
2WikiMultiHopQA, written as one JSON a line (id, question, answer, type,
paragraphs[{title, text, supporting}]).

The data is not part of this repository: point ``--kag`` at a git clone of
https://github.com/OpenSPG/KAG (a bare one will do; the files are read with
``git show``, the dev sample from the commit that still held it).

Run:  .venv/bin/python bench/multihop_data.py --kag PATH/TO/KAG [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path("/work/data/multihop/normalized.jsonl")
MUSIQUE_DEV = (
    "8901a93e04cd70c90e2fe029bb838a93c58c65ed"
    ":kag/examples/musique_pike/solver/data/musique_qa_100.json"
)
MUSIQUE_TRAIN = "HEAD:kag/open_benchmark/musique/data/qa_train.json"
TWOWIKI = "HEAD:kag/open_benchmark/2wiki/data/qa_sub.json"


def read(kag: Path, ref: str) -> list[dict[str, Any]]:
    """One JSON file of the KAG clone at ``ref`` (commit:path)."""
    text = subprocess.run(
        ["git", "-C", str(kag), "show", ref], check=True, capture_output=True, text=True
    ).stdout
    data: list[dict[str, Any]] = json.loads(text)
    return data


def musique(question: dict[str, Any]) -> dict[str, Any]:
    """A MuSiQue-Ans question; its type is its id's prefix (``2hop``, ``3hop1``, ...)."""
    return {
        "id": question["id"],
        "question": question["question"],
        "answer": question["answer"],
        "type": question["id"].split("__", 1)[0],
        "paragraphs": [
            {
                "title": p["title"],
                "text": p["paragraph_text"],
                "supporting": bool(p["is_supporting"]),
            }
            for p in question["paragraphs"]
        ],
    }


def twowiki(question: dict[str, Any]) -> dict[str, Any]:
    """A 2WikiMultiHopQA question: its context's sentences joined into a paragraph a
    title; a paragraph supports when a supporting fact names its title."""
    supporting = {title for title, _ in question["supporting_facts"]}
    return {
        "id": question["_id"],
        "question": question["question"],
        "answer": question["answer"],
        "type": question["type"],
        "paragraphs": [
            {"title": title, "text": " ".join(sentences), "supporting": title in supporting}
            for title, sentences in question["context"]
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kag", type=Path, required=True, help="a git clone of OpenSPG/KAG")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    questions: dict[str, dict[str, Any]] = {}
    for ref in (MUSIQUE_DEV, MUSIQUE_TRAIN):
        for q in read(args.kag, ref):
            questions.setdefault(q["id"], musique(q))
    for q in read(args.kag, TWOWIKI):
        questions.setdefault(q["_id"], twowiki(q))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for q in questions.values():
            out.write(json.dumps(q, ensure_ascii=False) + "\n")
    paragraphs = {(p["title"], p["text"]) for q in questions.values() for p in q["paragraphs"]}
    print(f"{len(questions)} questions, {len(paragraphs)} distinct paragraphs → {args.out}")


if __name__ == "__main__":
    main()
