"""What each way of cutting matching texts would embed: texts and model tokens per setup,
with no model run (the chunker and the chain only, then the tokenizer), so it is quick.

Run:  .venv/bin/python bench/matching_cost.py beir ../shared/data/squad-dev/corpus.jsonl
      .venv/bin/python bench/matching_cost.py folder path/to/folder   # e.g. real_folder --keep
      ... [--embed 300]  also embed the texts of 300 chunks (spread evenly) per setup, the
      setups taking turns for two rounds, and print the best seconds of each
Embedding time grows with both: tokens (the model's work) and texts (one model run each
with the int8 model). Quality needs an ingest: ``flexmatch eval`` with setups, or
bench/real_folder.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flexmatch.chains import ChainContext, Chunker, MatchingTextChain, build_chain
from flexmatch.config import ChainRef
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.models import Document, Element

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "sentences (one a text)": ("sentences", {}),
    "sentences, no chunk text": ("sentences", {"include_content": False}),
    "packed-sentences (short lines joined to 12 words)": ("packed-sentences", {}),
    "short lines joined to 20 words": ("sentences", {"min_text_words": 20}),
    "windows of 2 sentences": ("sentences", {"window": 2}),
    "sentence-windows (3 sentences)": ("sentence-windows", {}),
    "windows of 3, only in chunks of 120+ words": (
        "sentences",
        {"window": 3, "min_chunk_words": 120},
    ),
    "content (the chunk text only)": ("content", {}),
}


def documents(kind: str, path: Path) -> Iterator[Document]:
    if kind == "beir":
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            row = json.loads(line)
            yield Document(
                id=str(number),
                uri=row["_id"],
                source="default",
                title=row.get("title") or row["_id"],
                elements=[Element(kind="paragraph", text=row["text"])],
            )
        return
    from flexmatch.errors import FlexMatchError
    from flexmatch.inputs.parsing import parse_file

    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        try:
            parsed = parse_file(file)
        except FlexMatchError:
            continue
        yield Document(
            id=str(file),
            uri=str(file),
            source="default",
            title=parsed.title or file.name,
            elements=parsed.elements,
            metadata=parsed.metadata,
        )


def main() -> None:
    kind, path = sys.argv[1], Path(sys.argv[2])
    sample = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--embed" else 0
    context = ChainContext()
    chunker = build_chain(ChainRef(chain="structure"), Chunker, context)
    chains = {
        label: build_chain(ChainRef(chain=name, params=params), MatchingTextChain, context)
        for label, (name, params) in VARIANTS.items()
    }
    tokenizer = OnnxEmbedder()._load_tokenizer()
    totals = {label: [0, 0] for label in VARIANTS}
    chunks = 0
    every: list[tuple[Document, Any]] = []
    for document in documents(kind, path):
        sections = asyncio.run(chunker.run(document))
        chunks += len(sections)
        every.extend((document, section) for section in sections)
        for label, chain in chains.items():
            texts = [t.text for s in sections for t in asyncio.run(chain.run(s, document))]
            totals[label][0] += len(texts)
            totals[label][1] += sum(len(e.ids) for e in tokenizer.encode_batch(texts))
    print(f"{path}: {chunks} chunks\n")
    print("| matching texts | texts | a chunk | model tokens |")
    print("|---|---|---|---|")
    for label, (texts, tokens) in totals.items():
        print(f"| {label} | {texts:,} | {texts / max(chunks, 1):.1f} | {tokens:,} |")
    if sample:
        embed_seconds(chains, every[:: max(len(every) // sample, 1)][:sample])


def embed_seconds(chains: dict[str, MatchingTextChain], chosen: list[tuple[Document, Any]]) -> None:
    """Embed each setup's texts of the ``chosen`` chunks, setups taking turns, two rounds."""
    embedder = OnnxEmbedder()
    embedder.embed(["warm up"] * OnnxEmbedder.BULK)
    texts = {
        label: [t.text for d, s in chosen for t in asyncio.run(chain.run(s, d))]
        for label, chain in chains.items()
    }
    seconds: dict[str, list[float]] = {label: [] for label in chains}
    for _ in range(2):
        for label, batch in texts.items():
            started = time.perf_counter()
            embedder.embed(batch)
            seconds[label].append(time.perf_counter() - started)
    print(f"\nembedding the texts of {len(chosen)} chunks (best of 2 rounds, in turns):\n")
    print("| matching texts | texts | seconds | texts/s |")
    print("|---|---|---|---|")
    for label, batch in texts.items():
        best = min(seconds[label])
        print(f"| {label} | {len(batch):,} | {best:.1f} | {len(batch) / best:.0f} |")


if __name__ == "__main__":
    main()
