"""Late chunking: can one model run a chunk give its sentences' vectors?

The offline default embeds each sentence alone (one model run each) and the chunk text;
``content`` embeds the chunk alone, a third of the model tokens, and loses ranking. Late
chunking runs the model once over the chunk and mean-pools each sentence's own token
states: sentence vectors at the token cost of ``content``. This measures, dense only (no
BM25, no reranking: the engine's other signals are the same in every row), what each way
keeps on SQuAD dev paragraphs, and how many model tokens each embeds.

    .venv/bin/python bench/late_chunking.py --paragraphs 300
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

import numpy as np

from flexmatch.engine.embedders.onnx_minilm import OnnxEmbedder
from flexmatch.text import split_sentences

MIN_WORDS = 4  # the sentences chain's default: shorter lines are not matching texts


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def _load(data: Path, limit: int) -> tuple[list[dict], list[tuple[str, str]], dict]:
    corpus = [json.loads(line) for line in (data / "corpus.jsonl").open()][:limit]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (data / "queries.jsonl").open())}
    qrels: dict[str, dict[str, int]] = {}
    for path in sorted((data / "qrels").glob("*.tsv")):
        for row in csv.DictReader(path.open(), delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    ids = {doc["_id"] for doc in corpus}
    asked = [(qid, queries[qid]) for qid in qrels if any(c in ids for c in qrels[qid])]
    return corpus, asked, qrels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/squad-dev"))
    parser.add_argument("--paragraphs", type=int, default=300)
    args = parser.parse_args()
    if not (args.data / "corpus.jsonl").is_file():
        raise SystemExit(f"no BEIR corpus at {args.data} (pass --data)")
    corpus, asked, qrels = _load(args.data, args.paragraphs)
    embedder = OnnxEmbedder()
    tokenizer, session = embedder._load_tokenizer(), embedder._load()

    alone_texts, alone_owner = [], []
    late_vectors, late_owner, chunk_tokens = [], [], 0
    for index, doc in enumerate(corpus):
        text = doc["text"]
        encoding = tokenizer.encode(text)
        chunk_tokens += len(encoding.ids)
        ids = np.array([encoding.ids], dtype=np.int64)
        states = session.run(
            None,
            {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": 0 * ids},
        )[0][0]
        position = 0
        for sentence in split_sentences(text):
            start = text.find(sentence, position)
            if start < 0:
                continue
            position = start + len(sentence)
            if len(sentence.split()) < MIN_WORDS:
                continue
            alone_texts.append(f"{doc.get('title', '')}: {sentence}")
            alone_owner.append(index)
            tokens = [
                k
                for k, (a, b) in enumerate(encoding.offsets)
                if b > a and a >= start and b <= position
            ]
            if tokens:  # past the model's 256 tokens a sentence has no states: left out
                late_vectors.append(_unit(states[tokens].mean(0)))
                late_owner.append(index)
    alone = np.array(embedder.embed(alone_texts))
    alone_tokens = sum(len(e.ids) for e in tokenizer.encode_batch(alone_texts))
    chunks = np.array(embedder.embed([doc["text"] for doc in corpus]))
    queries = np.array(embedder.embed([text for _, text in asked]))

    def best_per_paragraph(vectors: np.ndarray, owner: list[int]) -> np.ndarray:
        sims = queries @ vectors.T
        scores = queries @ chunks.T  # the chunk text is a matching text in every row
        owners = np.array(owner)
        for paragraph in range(len(corpus)):
            columns = np.where(owners == paragraph)[0]
            if len(columns):
                scores[:, paragraph] = np.maximum(scores[:, paragraph], sims[:, columns].max(1))
        return scores

    def ndcg(scores: np.ndarray) -> float:
        total = 0.0
        for row, (qid, _) in enumerate(asked):
            relevant = qrels[qid]
            top = np.argsort(-scores[row])[:10]
            dcg = sum(
                relevant.get(corpus[j]["_id"], 0) / math.log2(r + 2) for r, j in enumerate(top)
            )
            ideal = sorted(relevant.values(), reverse=True)[:10]
            total += dcg / sum(v / math.log2(r + 2) for r, v in enumerate(ideal))
        return total / len(asked)

    print(f"{len(corpus)} paragraphs, {len(asked)} questions; dense only, nDCG@10")
    print(f"{'matching texts':44s} {'model tokens':>12s} {'nDCG@10':>8s}")
    rows = [
        ("chunk text only (content)", chunk_tokens, queries @ chunks.T),
        (
            "sentences alone + chunk (the default)",
            chunk_tokens + alone_tokens,
            best_per_paragraph(alone, alone_owner),
        ),
        (
            "late-chunked sentences + chunk",
            chunk_tokens,
            best_per_paragraph(np.array(late_vectors), late_owner),
        ),
    ]
    for name, tokens, scores in rows:
        print(f"{name:44s} {tokens:12,d} {ndcg(scores):8.4f}")


if __name__ == "__main__":
    main()
