"""A golden-questions file from a BEIR data set: every Nth query (first relevant document
as its expected answer), to measure ``flexmatch eval --kb`` and its ablation on a
knowledge base that holds the BEIR corpus.

    .venv/bin/python bench/golden_from_beir.py ../shared/data/squad-dev golden.yaml \\
        --every 10 --limit 500
    .venv/bin/flexmatch init squad-kb
    .venv/bin/flexmatch ingest --kb squad-kb ../shared/data/squad-dev/corpus.jsonl
    .venv/bin/flexmatch eval --kb squad-kb golden.yaml --ablate --setup dense-passages
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flexmatch import BeirDataset, GoldenQuestion, save_golden


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="BEIR folder")
    parser.add_argument("out", type=Path, help="the golden file to write")
    parser.add_argument("--split", default="test")
    parser.add_argument("--every", type=int, default=10, help="keep every Nth query")
    parser.add_argument("--limit", type=int, default=500, help="at most this many")
    args = parser.parse_args()
    data = BeirDataset.load(args.dataset, args.split)
    items = [
        GoldenQuestion.model_validate(
            {"question": text, "expect": {"document": next(iter(data.qrels[query_id]))}}
        )
        for query_id, text in list(data.queries.items())[:: args.every][: args.limit]
    ]
    save_golden(items, args.out)
    print(f"{len(items)} golden questions written to {args.out}")


if __name__ == "__main__":
    main()
