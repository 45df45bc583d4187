"""Context expansion on real documents: does ``expand`` bring the answer-bearing text
into what the agent reads, and what does it cost in tokens?

    .venv/bin/python bench/expand_context.py

Ingests the repository's long test documents (the Apache License in Markdown, the
harbour handbook sample, a memo PDF) into a throw-away knowledge base with the real local
embedding model and the offline chains, then asks questions whose answer lies in a
chunk next to the one that names their topic. For each expand mode it prints, per
question, whether the answer's text is in the facts block, and the block's tokens;
then the totals. A question's answer is a verbatim string of its document.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.text import count_tokens

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = [
    REPO / "tests" / "data" / "docs" / "LICENSE-Apache-2.0.md",
    REPO / "tests" / "data" / "docs" / "pdf_fake-memo.pdf",
    REPO / "flexmatch" / "samples" / "harbour-handbook.md",
]
# (question, a verbatim string of the text that answers it)
QUESTIONS = [
    (
        "What conditions must I meet when I redistribute copies of the Work?",
        'If the Work includes a "NOTICE" text file',
    ),
    (
        "What must a Derivative Work include when the Work has a NOTICE file?",
        "readable copy of the attribution notices",
    ),
    (
        "Does the license let me use the Licensor's trademarks?",
        "does not grant permission to use the trade names",
    ),
    (
        "What is a Contribution under the license?",
        "intentionally submitted to Licensor for inclusion in the Work",
    ),
    ("Which VHF channel do I call the harbour office on?", "VHF channel 14"),
    ("When is the harbour office open?", "It is open"),
]
MODES = ("none", "neighbours", "section")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top-n", type=int, default=3)
    parser.add_argument("--budget", type=int, default=1000, help="expand_budget_tokens")
    parser.add_argument("--min-tokens", type=int, default=60, help="expand_min_tokens")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        kb = KnowledgeBase.open(Path(folder) / "kb", embedder=OnnxEmbedder())
        with kb:
            report = kb.ingest([str(p) for p in DOCUMENTS])
            assert not report.failed, report.failed
            query = kb.config.query.model_copy(
                update={"expand_budget_tokens": args.budget, "expand_min_tokens": args.min_tokens}
            )
            kb.use_query_config(query)
            found = dict.fromkeys(MODES, 0)
            tokens = dict.fromkeys(MODES, 0)
            print(
                f"top_n={args.top_n}  expand_budget_tokens={args.budget}  "
                f"expand_min_tokens={args.min_tokens}"
            )
            print(f"{'question':70} " + " ".join(f"{m:>16}" for m in MODES))
            for question, answer in QUESTIONS:
                cells = []
                for mode in MODES:
                    result = kb.search(question, top_n=args.top_n, expand=mode)  # type: ignore[arg-type]
                    facts = kb.format_answer(result, "markdown")
                    has = " ".join(answer.split()) in " ".join(facts.split())
                    found[mode] += has
                    tokens[mode] += count_tokens(facts)
                    cells.append(f"{'yes' if has else 'no':>4} {count_tokens(facts):>6} tok")
                print(f"{question[:70]:70} " + " ".join(f"{c:>16}" for c in cells))
            print()
            for mode in MODES:
                print(
                    f"{mode:>10}: answer in the facts block for {found[mode]}/{len(QUESTIONS)} "
                    f"questions, {tokens[mode] / len(QUESTIONS):.0f} tokens a block on average"
                )


if __name__ == "__main__":
    main()
