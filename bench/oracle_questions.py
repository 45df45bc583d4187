"""Do perfect questions help retrieval? SQuAD dev split into questions an LLM "wrote" and
questions users ask, ingested through the real engine, and ranked several ways.

DESIGN NOTE (measured 2026-12-07 on the whole split; docs/benchmarks.md, "Questions
beside sentences", has the tables and the commands):

1. Index an LLM's questions *beside* the offline matching texts, never instead of them
   (``questions`` with ``beside_sentences: true``, its default): instead of the
   sentences, even perfect questions rank below the offline default (0.8993 against
   0.9140 nDCG@10 through the engine; generic ones 0.8782).
2. Shipped, three rules, all keyed on the kinds ``flexmatch.engine.points`` names
   (``QUERY_LIKE_KINDS``, ``GENERATED_KINDS``: the one place a further kind joins):
   a. a question's cosine counts 0.15 less (``QUERY_LIKE_OFFSET``) wherever kinds are
      compared: a chunk's best hit in the first stage, the dense and question signals
      (``complete`` searches a chunk's sentences apart only where its best is a
      question: p50 18.9 -> 19.6 ms on oracle-beside, back to back; an index without
      questions makes no search more). Fitted on the fitting split (0.15; 0.175 dense
      alone). Alone it is within noise in the fused ranking (oracle 0.9201 against
      0.9209 for the plain max) but keeps dense-only ranking safe (off-topic questions:
      0.7925 against 0.5477 under the max);
   b. a question's words join its chunk's BM25 text (doc2query): the largest gain
      found, +0.010 for oracle questions over the offline ranking on its own;
   c. a generated question whose cosine to its own chunk's text is below 0.2
      (``GENERATED_MIN_COSINE``) is not stored: it keeps 98 % of the served questions
      and drops 98 % of another paragraph's. Without it, off-topic questions in the
      BM25 text cost 0.0036 (0.9104); with it 0.0005.
   Through the engine (nDCG@10): offline 0.9140 (unchanged: an index without
   questions ranks exactly as before), oracle beside 0.9261 (was 0.9213: +0.0121 over
   the offline default), generic beside 0.9149 (was 0.9130), off-topic beside 0.9135
   (was 0.9158). Without rule c: 0.9277 / 0.9150 / 0.9104.
3. Measured and not shipped (the study, nDCG@10 oracle / generic / off-topic, offline
   0.9136 on the same candidates; parameters fitted on the fitting split):
   - centering (the mean of the fitting index's questions taken out of the query and
     every question before the cosine): max(S, Qc - 0.1) 0.9214 / 0.9148 / 0.9153, with
     the BM25 expansion 0.9280 / 0.9154 / 0.9106: the same as the offset (0.9201 /
     0.9147 / 0.9154 and 0.9285 / 0.9156 / 0.9113); as an extra signal (w = 0.1)
     0.9160 / 0.9116 / 0.9165. The "question form" direction is what the offset
     already removes; centering adds no information;
   - aggregates over a chunk's questions, each as an extra signal (w = 0.1): mean of
     the top 2 0.9155 / 0.9105, centroid of the centered questions 0.9150 / 0.9103,
     BM25 of the questions alone 0.9159 / 0.9089: all below the max;
   - the offset in the first stage as well: 0.9284 / 0.9153 / 0.9104 against 0.9285 /
     0.9159 / 0.9109 without (shipped anyway: it is the same rule everywhere, and what
     keeps dense retrieval safe);
   - fusion weights refitted with the BM25 expansion (0.4 / 0.2 / 0.4): 0.9301 /
     0.9163 but off-topic 0.9013, and every offline ranking changes;
   - earlier (same split): z-scores per kind, a gate S + 0.6 max(Q - S, 0), a separate
     question weight, RRF per kind and a logistic regression on the four maxima: none
     above the max.
4. The target of +0.02 over the offline default is not met: +0.0121 through the engine
   (+0.0137 without the on-topic rule, which off-topic questions need). SQuAD's
   questions about a paragraph ask about other facts of it than the asked ones; the
   gain left is in the questions, not in how their scores combine.
5. Measured 2026-12-07 with this bench (``--paragraphs 400 --no-engine``; then the same
   computation on the whole split with those fitted parameters): hubness taken out of
   each question (CSLS, ``hubness``), a per-kind linear (Platt) calibration, the
   index-wide question list fused by RRF, an agreement bonus, a rare-word gate, several
   questions of a chunk counting together, the question cosine as a fourth signal. On
   the whole split (oracle nDCG@10, shipped 0.9261): 0.9225, 0.9273, 0.9137, 0.9264,
   0.9261, 0.9234, 0.9259: none more than +0.0012, so none is shipped. Why the gain
   shrinks beyond 150 paragraphs (``competition``, ``gains``): the queries, mostly. In
   the whole-split index the first 150 paragraphs' queries still gain +0.0245, the
   rest +0.009; for fixed queries, a 10 times larger index lowers how often the best
   question is the right paragraph's only from 0.624 to 0.607.

The study below (``study``) computes these candidates from an index's stored vectors
and the engine's BM25; the study figures above were measured with the same computation
(scripts outside the bench) on the indexes before rules b and c, with BM25 over the
chunk and its questions computed from qdrant-edge's BM25 weights; the engine figures
on the new layout; the bench's own study was re-run on the new layout with 400
paragraphs (item 5).

The split: per paragraph, its questions sorted by id; even positions are served as the
LLM's generated questions (the fake LLM server's ``responder`` answers each ``<chunk>`` of
the questions prompt with that paragraph's questions), odd positions are asked. For
fitting, the served half is split again: positions 0, 4, 8, ... are served to a second
index, positions 2, 6, 10, ... are asked of it; the asked (odd) queries are never fitted on.

Indexes (each ingested once through ``KnowledgeBase.ingest``, cached in ``--work``):
  offline          ``sentences`` (each sentence with its title, plus the chunk): the default
  oracle-instead   ``questions`` with ``beside_sentences: false`` (questions and the
                   chunk), answered with the paragraph's served questions
  oracle-beside    ``questions`` as it ships: those questions *and* the sentences and
                   the chunk (``beside_sentences: true``)
  generic-instead  ``questions`` with ``beside_sentences: false``, answered by the fake
                   LLM's default (one generic question per sentence: "What does the text
                   say about <its first words>?")
  generic-beside   the built-in ``questions`` chain as it ships, answered the same way
  fit-beside       oracle-beside on the fitting split
  offtopic-beside  each paragraph served another's questions (half the corpus away),
                   beside the sentences and the chunk
  fit-offtopic-beside  the same on the fitting split (fits keep it within 0.002)
Every index uses ``headings`` qualifying text and the ``identity`` query transform, so only
the matching texts differ; queries run with the default query settings (hybrid, DBSF,
``fusion-rerank``).

The study re-ranks outside the engine from the stored vectors (``scroll_vectors``) and
the engine's BM25 (``search_lexical`` over the chunk texts): per query, each chunk's best
cosine per match kind (S: sentences, Q: questions, C: content) and BM25 (B); the first
stage as the engine runs it (top-50 dense points over the kinds in view, top-50 BM25,
DBSF), then a ranking of those 50 candidates. ``fusion(x)`` is the shipped reranker
(0.4 x + 0.3 C + 0.3 B, each min-max normalised over the candidates) with x in the place
of the question signal. A view leaves kinds out: "offline" sees S and C of a beside index
(the vectors are the same ones the offline index stores).

Run:  nice -n 19 .venv/bin/python bench/oracle_questions.py [--paragraphs 150]
      [--data /work/shared/data/squad-dev] [--work /tmp/flexmatch-oracle]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import itertools
import json
import re
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from flexmatch.config import KBConfig
from flexmatch.engine import fusion
from flexmatch.engine.points import QUERY_LIKE_OFFSET
from flexmatch.evaluation import BeirDataset, Scores, evaluate, mrr_at_k, ndcg_at_k, recall_at_k
from flexmatch.knowledge_base import KnowledgeBase
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import default_responder
from flexmatch.testing.fake_llm.text import prompt_text

REPO = Path(__file__).resolve().parents[1]
TENANT = "default"
TOP_K = 50  # the default query.top_k: candidates the reranker sees
SHOWN = 30  # results per query the evaluation ranks documents by (flexmatch.evaluation)


# -- the ingest side ----------------------------------------------------------------------
CHAIN_YAML = """kind: matching_text
type: questions
prompt: questions.j2
fallback: sentences
params: {{count: {count}, include_content: true, beside_sentences: {beside}, chunks_per_call: 4}}
output: {{format: json, key: questions, max_items: {count}, max_chars: 300}}
"""


@dataclass(frozen=True)
class Index:
    name: str
    chain: str  # the matching_text chain (a built-in, or one CHAIN_YAML writes)
    served: str | None  # "eval" / "fit": the oracle questions served; None: the default
    # (count, beside_sentences) of a ``questions`` chain written into the kb
    yaml: tuple[int, bool] | None = None


INDEXES = [
    Index("offline", "sentences", None),
    Index("oracle-instead", "oracle-instead", "eval", (30, False)),
    Index("oracle-beside", "oracle-beside", "eval", (30, True)),
    Index("generic-instead", "generic-instead", None, (5, False)),
    Index("generic-beside", "questions", None),  # the built-in chain as it ships
    Index("fit-beside", "oracle-beside", "fit", (30, True)),
    Index("offtopic-beside", "oracle-beside", "offtopic", (30, True)),
    Index("fit-offtopic-beside", "oracle-beside", "fit-offtopic", (30, True)),
]


@dataclass
class Split:
    """Paragraphs and their questions: served (the index's) and asked (the queries)."""

    paragraphs: dict[str, str]  # id -> text
    served: dict[str, dict[str, list[str]]]  # "eval"/"fit" -> paragraph -> questions
    asked: dict[str, dict[str, str]]  # "eval"/"fit" -> query id -> text
    qrels: dict[str, dict[str, int]]
    corpus: Path = field(default=Path())


def load_split(data: Path, count: int | None, work: Path) -> Split:
    rows = [json.loads(line) for line in (data / "corpus.jsonl").read_text().splitlines()]
    rows = rows[:count]
    paragraphs = {r["_id"]: r["text"] for r in rows}
    texts = {
        json.loads(line)["_id"]: json.loads(line)["text"]
        for line in (data / "queries.jsonl").read_text().splitlines()
    }
    by_paragraph: dict[str, list[str]] = {}
    with (data / "qrels" / "test.tsv").open() as handle:
        for query_id, corpus_id, _ in list(csv.reader(handle, delimiter="\t"))[1:]:
            if corpus_id in paragraphs:
                by_paragraph.setdefault(corpus_id, []).append(query_id)
    served: dict[str, dict[str, list[str]]] = {
        "eval": {},
        "fit": {},
        "offtopic": {},
        "fit-offtopic": {},
    }
    asked: dict[str, dict[str, str]] = {"eval": {}, "fit": {}}
    qrels: dict[str, dict[str, int]] = {}
    for paragraph, ids in by_paragraph.items():
        ids = sorted(ids)
        served["eval"][paragraph] = [texts[q] for q in ids[0::2]]
        served["fit"][paragraph] = [texts[q] for q in ids[0::4]]
        asked["eval"].update({q: texts[q] for q in ids[1::2]})
        asked["fit"].update({q: texts[q] for q in ids[2::4]})
        qrels.update({q: {paragraph: 1} for q in ids})
    # off-topic: each paragraph is served another's questions (half the corpus away: most
    # often another article), what a confused or mismatched LLM answer does
    order = list(paragraphs)
    for number, paragraph in enumerate(order):
        other = order[(number + len(order) // 2) % len(order)]
        served["offtopic"][paragraph] = served["eval"].get(other, [])
        served["fit-offtopic"][paragraph] = served["fit"].get(other, [])
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return Split(paragraphs, served, asked, qrels, corpus)


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


_CHUNK = re.compile(r'<chunk id="(\d+)">(.*?)</chunk>', re.DOTALL)
_INNER = re.compile(r"<(title|section)>.*?</\1>", re.DOTALL)


def oracle_responder(split: Split, which: str, misses: list[str]) -> Callable[[list[dict]], str]:
    """Answers the questions prompt with each chunk's paragraph's served questions."""
    by_text = {_norm(text): pid for pid, text in split.paragraphs.items()}

    def paragraph_of(chunk: str) -> str | None:
        key = _norm(chunk)
        if key in by_text:
            return by_text[key]
        return next((pid for text, pid in by_text.items() if key[:80] in text), None)

    def respond(messages: list[dict]) -> str:
        prompt = prompt_text(messages)
        if '<chunk id="' not in prompt or '"questions"' not in prompt:
            return default_responder(messages)
        entries = []
        for match in _CHUNK.finditer(prompt):
            chunk = _INNER.sub("", match.group(2)).strip()
            pid = paragraph_of(chunk)
            if pid is None:
                misses.append(chunk[:60])
            questions = split.served[which].get(pid or "", [])
            entries.append({"chunk": int(match.group(1)), "questions": questions})
        return json.dumps({"chunks": entries})

    return respond


def kb_config(index: Index, server: FakeLLMServer) -> KBConfig:
    config = KBConfig.model_validate(
        {
            "models": {"llm": "openai/fake", "llm_api_base": server.base_url, "llm_api_key": "k"},
            "sources": {
                "default": {
                    "matching_text": index.chain,
                    "qualifying_text": "headings",
                }
            },
            "query": {"query_transform": "identity"},
        }
    )
    return config


def ingest_all(split: Split, work: Path, server: FakeLLMServer, embedder: Any) -> dict[str, Path]:
    folders = {}
    for index in INDEXES:
        folder = work / index.name
        folders[index.name] = folder
        if (folder / "ingested").is_file():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        if index.yaml:
            (folder / "chains").mkdir(exist_ok=True)
            count, beside = index.yaml
            (folder / "chains" / f"{index.chain}.yaml").write_text(
                CHAIN_YAML.format(count=count, beside=str(beside).lower()), encoding="utf-8"
            )
        misses: list[str] = []
        server.responder = oracle_responder(split, index.served, misses) if index.served else None
        started = time.perf_counter()
        with KnowledgeBase.open(
            folder, config=kb_config(index, server), env={}, embedder=embedder
        ) as kb:
            report = kb.ingest([split.corpus])
        if misses:
            raise SystemExit(f"{index.name}: {len(misses)} chunks matched no paragraph")
        (folder / "ingested").write_text(report.model_dump_json(), encoding="utf-8")
        print(
            f"ingested {index.name}: {report.chunks} chunks, {report.matching_texts} texts, "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
    return folders


# -- the engine's numbers ------------------------------------------------------------------
def engine_scores(
    split: Split, folders: dict[str, Path], server: FakeLLMServer, embedder: Any, run: bool
) -> dict[str, Scores]:
    """The engine's scores per index (kept in ``--work``: a rerun of the study reuses them)."""
    kept = split.corpus.parent / "engine.json"
    out: dict[str, Scores] = {}
    if kept.is_file():
        out = {k: Scores.model_validate(v) for k, v in json.loads(kept.read_text()).items()}
    dataset = BeirDataset(corpus=split.corpus, queries=split.asked["eval"], qrels=split.qrels)
    for index in INDEXES:
        if not run or index.name.startswith("fit-") or index.name in out:
            continue
        with KnowledgeBase.open(
            folders[index.name], config=kb_config(index, server), env={}, embedder=embedder
        ) as kb:
            asyncio.run(evaluate(kb, dataset, limit=20))  # warm: the model, the store's pages
            out[index.name] = asyncio.run(evaluate(kb, dataset))
        print(f"engine {index.name}: {out[index.name].model_dump()}", flush=True)
    if run:
        kept.write_text(json.dumps({k: v.model_dump() for k, v in out.items()}), encoding="utf-8")
    return out


# -- the study: signals per candidate ------------------------------------------------------
KINDS = ("sentence", "question", "content")


@dataclass
class Points:
    """An index's match points: vectors, and which chunk and kind each is."""

    vectors: np.ndarray
    chunk: np.ndarray  # chunk number per point
    kind: np.ndarray  # kind number per point (KINDS)
    chunk_ids: list[str]
    documents: list[str]  # per chunk number
    texts: list[str] = field(default_factory=list)  # per point, its matched text


def read_points(kb: KnowledgeBase) -> Points:
    rows = kb.store.scroll_vectors(
        TENANT,
        {"record": "match"},
        fields=("chunk_id", "document_id", "match_kind", "matched_text"),
    )
    chunk_ids = sorted({str(h.payload["chunk_id"]) for h, _ in rows})
    number = {c: i for i, c in enumerate(chunk_ids)}
    documents = [""] * len(chunk_ids)
    for hit, _ in rows:
        documents[number[str(hit.payload["chunk_id"])]] = str(hit.payload["document_id"])
    return Points(
        vectors=np.asarray([v for _, v in rows], dtype=np.float32),
        chunk=np.asarray([number[str(h.payload["chunk_id"])] for h, _ in rows]),
        kind=np.asarray([KINDS.index(str(h.payload["match_kind"])) for h, _ in rows]),
        chunk_ids=chunk_ids,
        documents=documents,
        texts=[str(h.payload.get("matched_text", "")) for h, _ in rows],
    )


@dataclass
class Query:
    """One query's candidates (the engine's first stage, emulated) with every signal."""

    relevant: dict[str, int]
    documents: list[str]
    S: np.ndarray  # best sentence cosine
    Q: np.ndarray  # best question cosine; nan where a chunk has none (or the view has none)
    C: np.ndarray  # chunk-text cosine
    B: np.ndarray  # BM25 as the index scores it (chunk text and, now, its questions)
    B0: np.ndarray  # BM25 of the chunk text alone (the offline index's)
    Qc: np.ndarray  # best question cosine, query and questions centered (mean question out)
    Q2: np.ndarray  # mean of the two best question cosines
    Qm: np.ndarray  # centered cosine to the centroid of the chunk's questions
    Qh: np.ndarray  # best question cosine less that question's hubness (``hubness``)
    Q3: np.ndarray  # (candidates, 3): the chunk's three best question cosines, nan-padded
    Qrank: np.ndarray  # the chunk's rank in the index-wide list of best question cosines
    shared: np.ndarray  # the rarest word (idf) the query shares with its best question


def best_per_chunk(sims: np.ndarray, points: Points, kind: int, top: int = 1) -> np.ndarray:
    """(queries, chunks) best cosine over the points of ``kind`` (the mean of the ``top``
    best); nan where a chunk has none."""
    out = np.full((sims.shape[0], len(points.chunk_ids)), np.nan)
    idx = np.nonzero(points.kind == kind)[0]
    if not len(idx):
        return out
    idx = idx[np.argsort(points.chunk[idx], kind="stable")]
    chunks = points.chunk[idx]
    starts = np.concatenate([[0], np.nonzero(np.diff(chunks))[0] + 1])
    if top == 1:
        out[:, chunks[starts]] = np.maximum.reduceat(sims[:, idx], starts, axis=1)
        return out
    for begin, end in zip(starts, np.append(starts[1:], len(idx)), strict=True):
        block = -np.sort(-sims[:, idx[begin:end]], axis=1)[:, :top]
        out[:, chunks[begin]] = block.mean(axis=1)
    return out


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def centroids(points: Points, mean: np.ndarray) -> np.ndarray:
    """Per chunk, the normalised mean of its centered question vectors (0 without any)."""
    mask = points.kind == KINDS.index("question")
    out = np.zeros((len(points.chunk_ids), points.vectors.shape[1]))
    np.add.at(out, points.chunk[mask], unit(points.vectors[mask] - mean))
    has = np.linalg.norm(out, axis=1) > 0
    out[has] = unit(out[has])
    return out


HUB_K = 10  # neighbours a question's hubness is the mean cosine to
_WORD = re.compile(r"\w+")
_STOP = frozenset(
    _WORD.findall(
        "the a an of in on at to for by with from and or is was were are be been what which "
        "who whom whose when where why how did do does that this these those as it its into "
        "than then there their they he she his her not no"
    )
)


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def hubness(points: Points) -> np.ndarray:
    """Per point, for a question: the mean cosine to its ``HUB_K`` nearest questions of
    *other* chunks (CSLS's r term, computed as an ingest would: from the index alone); 0
    for any other kind. A question near many others ("What year did ...") is a hub."""
    out = np.zeros(len(points.kind))
    idx = np.nonzero(points.kind == KINDS.index("question"))[0]
    if len(idx) < 2:
        return out
    vectors = unit(points.vectors[idx])
    sims = vectors @ vectors.T
    sims[points.chunk[idx][:, None] == points.chunk[idx][None, :]] = -1.0
    k = min(HUB_K, len(idx) - 1)
    out[idx] = -np.sort(-sims, axis=1)[:, :k].mean(axis=1)
    return out


def build_queries(
    points: Points,
    vectors: np.ndarray,
    relevant: list[dict[str, int]],
    bm25: list[dict[str, float]],
    bm25_alone: list[dict[str, float]],
    view: tuple[str, ...],
    mean: np.ndarray,
    texts: list[str] | None = None,
    idf: dict[str, float] | None = None,
) -> list[Query]:
    """Each query's 50 candidates as the engine's first stage finds them among the kinds
    in ``view`` (top-50 dense points collapsed to chunks, a question's cosine lowered by
    the shipped offset; top-50 BM25 as the index scores it; DBSF), with every signal."""
    sims = vectors @ points.vectors.T
    centered = unit(vectors - mean) @ unit(points.vectors - mean).T
    question = KINDS.index("question")
    has_q = "question" in view
    tables = {k: best_per_chunk(sims, points, KINDS.index(k)) for k in KINDS if k in view}
    if has_q:
        tables["Qc"] = best_per_chunk(centered, points, question)
        tables["Q2"] = best_per_chunk(sims, points, question, top=2)
        cents = centroids(points, mean)
        tables["Qm"] = np.where(
            np.linalg.norm(cents, axis=1) > 0, unit(vectors - mean) @ cents.T, np.nan
        )
        tables["Qh"] = best_per_chunk(sims - hubness(points)[None, :], points, question)
    question_points: dict[int, np.ndarray] = {}
    if has_q:
        idx = np.nonzero(points.kind == question)[0]
        for c in np.unique(points.chunk[idx]):
            question_points[int(c)] = idx[points.chunk[idx] == c]
    kinds = tuple(KINDS.index(k) for k in view)
    view_idx = np.nonzero(np.isin(points.kind, kinds))[0]
    offset = np.where(points.kind[view_idx] == question, QUERY_LIKE_OFFSET, 0.0)
    number = {c: i for i, c in enumerate(points.chunk_ids)}
    out = []
    for row in range(len(vectors)):
        raw = sims[row, view_idx]
        order = np.argsort(-raw, kind="stable")[:TOP_K]  # the store's top-K, by cosine
        dense: dict[str, float] = {}
        for p, score in zip(view_idx[order], (raw - offset)[order], strict=True):
            key = str(points.chunk[p])
            dense[key] = max(dense.get(key, -2.0), float(score))
        lexical = {
            str(number[c]): s for c, s in sorted(bm25[row].items(), key=lambda x: -x[1])[:TOP_K]
        }
        fused_ = fusion.dbsf([d for d in (dense, lexical) if d])
        chosen = [int(k) for k in fusion.ranking(fused_)[:TOP_K]]

        def signal(name: str, chosen: list[int] = chosen, row: int = row) -> np.ndarray:
            table = tables.get(name)
            if table is None:
                return np.full(len(chosen), np.nan)
            return table[row, chosen].astype(np.float64)

        def lex(scores: dict[str, float], chosen: list[int] = chosen) -> np.ndarray:
            return np.asarray([scores.get(points.chunk_ids[c], 0.0) for c in chosen])

        top3 = np.full((len(chosen), 3), np.nan)
        qrank = np.full(len(chosen), np.inf)
        shared = np.zeros(len(chosen))
        if has_q:
            best_q = tables["question"][row]
            present = ~np.isnan(best_q)
            order_q = np.argsort(-np.where(present, best_q, -9.0), kind="stable")
            rank_of = np.empty(len(best_q))
            rank_of[order_q] = np.arange(1, len(best_q) + 1)
            rank_of[~present] = np.inf
            asked = words(texts[row]) if texts else set()
            for j, c in enumerate(chosen):
                qrank[j] = rank_of[c]
                own = question_points.get(c)
                if own is None:
                    continue
                cos = sims[row, own]
                top3[j, : min(3, len(own))] = -np.sort(-cos)[:3]
                common = asked & words(points.texts[own[int(np.argmax(cos))]])
                shared[j] = max(((idf or {}).get(w, 0.0) for w in common), default=0.0)

        out.append(
            Query(
                relevant=relevant[row],
                documents=[points.documents[c] for c in chosen],
                S=signal("sentence"),
                Q=signal("question"),
                C=signal("content"),
                B=lex(bm25[row]),
                B0=lex(bm25_alone[row]),
                Qc=signal("Qc"),
                Q2=signal("Q2"),
                Qm=signal("Qm"),
                Qh=signal("Qh"),
                Q3=top3,
                Qrank=qrank,
                shared=shared,
            )
        )
    return out


def lexical_scores(kb: KnowledgeBase, texts: list[str]) -> list[dict[str, float]]:
    """BM25 of every chunk per query, as the engine's lexical search scores it."""
    out = []
    for text in texts:
        hits = kb.store.search_lexical(TENANT, text, 5000, {"match_kind": "content"})
        out.append({str(h.payload["chunk_id"]): h.score for h in hits})
    return out


# -- rankings ---------------------------------------------------------------------------------
def mm(values: np.ndarray) -> np.ndarray:
    """Min-max over the candidates that have the signal (0 for those without), as
    ``fusion.minmax`` and the fusion reranker do."""
    present = ~np.isnan(values)
    out = np.zeros_like(values)
    if not present.any():
        return out
    low, high = values[present].min(), values[present].max()
    out[present] = 1.0 if high == low else (values[present] - low) / (high - low)
    return out


def fused(q: Query, x: np.ndarray, lexical: np.ndarray, extra: tuple = ()) -> np.ndarray:
    """The shipped fusion reranker with ``x`` as its question signal and ``lexical`` as
    its BM25 signal (plus ``extra``: (weight, signal) pairs, each min-max normalised)."""
    total = 0.4 * mm(x) + 0.3 * mm(q.C) + 0.3 * mm(lexical)
    for weight, values in extra:
        total = total + weight * mm(values)
    return total


def sentences_or_q(q: Query) -> np.ndarray:
    """S where present; a view without sentences (questions instead) falls back to Q."""
    return np.where(np.isnan(q.S), q.Q, q.S)


def offset(q: Query, question: np.ndarray, delta: float) -> np.ndarray:
    """max(S, question - delta): a question signal counts only where it beats the sentences
    by more than ``delta``."""
    return np.fmax(sentences_or_q(q), question - delta)


Ranker = Callable[[Query, dict[str, Any]], np.ndarray]


def r_offline(q: Query, p: dict[str, Any]) -> np.ndarray:
    return fused(q, sentences_or_q(q), q.B0)


def r_max(q: Query, p: dict[str, Any]) -> np.ndarray:
    return fused(q, np.fmax(q.S, q.Q), q.B0)


def r_offset_alone(q: Query, p: dict[str, Any]) -> np.ndarray:
    return fused(q, offset(q, q.Q, p["delta"]), q.B0)


def r_expansion(q: Query, p: dict[str, Any]) -> np.ndarray:
    return fused(q, sentences_or_q(q), q.B)


def r_shipped(q: Query, p: dict[str, Any]) -> np.ndarray:
    return fused(q, offset(q, q.Q, p["delta"]), q.B)


def r_centered(q: Query, p: dict[str, Any]) -> np.ndarray:
    return fused(q, offset(q, q.Qc, p["delta"]), q.B)


def r_plus(name: str) -> Ranker:
    """The shipped ranking with one more signal (``name``), weighted ``w``."""

    def rank(q: Query, p: dict[str, Any]) -> np.ndarray:
        x = offset(q, q.Q, QUERY_LIKE_OFFSET)
        return fused(q, x, q.B, ((p["w"], getattr(q, name)),))

    return rank


def r_top2(q: Query, p: dict[str, Any]) -> np.ndarray:
    return fused(q, offset(q, q.Q2, p["delta"]), q.B)


def r_reweighted(q: Query, p: dict[str, Any]) -> np.ndarray:
    x = offset(q, q.Q, QUERY_LIKE_OFFSET)
    return p["x"] * mm(x) + p["c"] * mm(q.C) + p["b"] * mm(q.B)


def r_dense(q: Query, p: dict[str, Any]) -> np.ndarray:
    """Dense alone (``reranker: none`` on dense retrieval): the best cosine over the
    chunk's texts, questions offset by ``delta`` (None: no question counts)."""
    best = np.fmax(sentences_or_q(q), q.C)
    return best if p.get("delta") is None else np.fmax(best, q.Q - p["delta"])


def shipped_score(q: Query) -> np.ndarray:
    return fused(q, offset(q, q.Q, QUERY_LIKE_OFFSET), q.B)


def r_hub(q: Query, p: dict[str, Any]) -> np.ndarray:
    """CSLS-style: each question's cosine less its hubness, then the offset ``delta``."""
    return fused(q, offset(q, q.Qh, p["delta"]), q.B)


def r_linear(q: Query, p: dict[str, Any]) -> np.ndarray:
    """A per-kind calibration a·Q - δ onto the sentence scale (what a Platt fit per kind
    amounts to once mapped back to the sentences' scale)."""
    return fused(q, np.fmax(sentences_or_q(q), p["a"] * q.Q - p["delta"]), q.B)


def r_rrf_questions(q: Query, p: dict[str, Any]) -> np.ndarray:
    """The shipped ranking and the index-wide list of chunks by best question, fused by
    RRF (k = 60), the question list weighted ``w``."""
    rank = np.empty(len(q.documents))
    rank[np.argsort(-shipped_score(q), kind="stable")] = np.arange(1, len(q.documents) + 1)
    return 1 / (60 + rank) + p["w"] / (60 + q.Qrank)


def r_agree(q: Query, p: dict[str, Any]) -> np.ndarray:
    """The shipped score, plus ``b`` where the chunk's best question scores above ``t`` and
    the chunk is also among the sentences' top ``n``."""
    s = np.nan_to_num(sentences_or_q(q), nan=-9.0)
    rank = np.empty(len(s))
    rank[np.argsort(-s, kind="stable")] = np.arange(1, len(s) + 1)
    agree = (rank <= p["n"]) & (np.nan_to_num(q.Q, nan=-9.0) > p["t"])
    return shipped_score(q) + p["b"] * agree


def r_gate(q: Query, p: dict[str, Any]) -> np.ndarray:
    """A question counts only where it shares a word of idf >= ``g`` with the query."""
    return fused(q, offset(q, np.where(q.shared >= p["g"], q.Q, np.nan), p["delta"]), q.B)


def r_several(q: Query, p: dict[str, Any]) -> np.ndarray:
    """The shipped score plus ``w``·Σ γ^i max(Q_i - t, 0) over the chunk's three best
    questions: several matching questions count more than one."""
    decay = np.asarray([1.0, p["g"], p["g"] ** 2])
    several = np.nansum(np.maximum(q.Q3 - p["t"], 0.0) * decay, axis=1)
    return fused(q, offset(q, q.Q, QUERY_LIKE_OFFSET), q.B, ((p["w"], several),))


def features(q: Query) -> np.ndarray:
    """Per-candidate features of the learned combination (a missing question signal
    reads as the sentence one)."""
    s = sentences_or_q(q)
    cols = [s, np.fmax(s, q.Q), np.fmax(s, q.Qc), np.fmax(s, q.Q2), q.Qm, q.C, q.B, q.B0]
    cols = [np.where(np.isnan(c), s, c) for c in cols[:4]] + [np.nan_to_num(c) for c in cols[4:]]
    return np.stack([mm(c) for c in cols] + cols[:6], axis=1)


def r_logreg(q: Query, p: dict[str, Any]) -> np.ndarray:
    return features(q) @ p["coef"] + p["intercept"]


# -- evaluation --------------------------------------------------------------------------
def measure(queries: list[Query], ranker: Ranker, params: dict[str, Any]) -> dict[str, float]:
    totals = {"ndcg": 0.0, "r5": 0.0, "mrr": 0.0}
    for q in queries:
        score = ranker(q, params)
        order = np.argsort(-score, kind="stable")[:SHOWN]
        ranking = list(dict.fromkeys(q.documents[i] for i in order))
        totals["ndcg"] += ndcg_at_k(ranking, q.relevant)
        totals["r5"] += recall_at_k(ranking, q.relevant, 5)
        totals["mrr"] += mrr_at_k(ranking, q.relevant)
    return {k: v / max(1, len(queries)) for k, v in totals.items()}


@dataclass
class Candidate:
    name: str
    ranker: Ranker
    grid: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    params: dict[str, Any] = field(default_factory=dict)
    baseline: tuple[Ranker, dict[str, Any]] = (r_offline, {})  # what "today" means for it


def fit(cand: Candidate, fitq: dict[str, list[Query]]) -> str:
    """Choose the grid point with the best oracle nDCG on the fitting queries among those
    that keep generic and off-topic questions within 0.002 of the offline ranking there
    (else the best oracle + generic + off-topic); returns how it was chosen."""
    base = measure(fitq["offline"], *cand.baseline)["ndcg"]
    best: tuple[float, dict[str, Any]] | None = None
    fallback: tuple[float, dict[str, Any]] | None = None
    for params in cand.grid:
        got = {v: measure(fitq[v], cand.ranker, params)["ndcg"] for v in fitq if v != "offline"}
        safe = min(got["generic"], got["off-topic"]) >= base - 0.002
        if safe and (best is None or got["oracle"] > best[0]):
            best = (got["oracle"], params)
        if fallback is None or sum(got.values()) > fallback[0]:
            fallback = (sum(got.values()), params)
    chosen = best or fallback
    assert chosen is not None
    cand.params = chosen[1]
    got = {v: measure(fitq[v], cand.ranker, cand.params)["ndcg"] for v in fitq}
    how = "" if best else "; no point kept within 0.002: best sum"
    return (
        f"{cand.name}: {_show(cand.params)} (fitting split nDCG: oracle {got['oracle']:.4f}, "
        f"generic {got['generic']:.4f}, off-topic {got['off-topic']:.4f}, the offline "
        f"ranking of the offline index {base:.4f}{how})"
    )


def _show(params: dict[str, Any]) -> str:
    def one(v: Any) -> str:
        if isinstance(v, np.ndarray):
            return "[" + ", ".join(f"{x:+.3f}" for x in v) + "]"
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    return ", ".join(f"{k}={one(v)}" for k, v in params.items()) or "-"


def fit_logreg(fitq: dict[str, list[Query]]) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression

    rows, labels = [], []
    for queries in fitq.values():
        for q in queries:
            rows.append(features(q))
            labels.append([1 if d in q.relevant else 0 for d in q.documents])
    x, y = np.concatenate(rows), np.concatenate([np.asarray(v) for v in labels])
    model = LogisticRegression(C=1.0, max_iter=2000, class_weight="balanced").fit(x, y)
    return {"coef": model.coef_[0], "intercept": float(model.intercept_[0])}


def candidates() -> list[Candidate]:
    deltas = [{"delta": d} for d in np.round(np.arange(0.0, 0.31, 0.05), 3).tolist()]
    weights = [{"w": w} for w in (0.0, 0.05, 0.1, 0.2, 0.3)]
    shipped = {"delta": QUERY_LIKE_OFFSET}
    return [
        Candidate("fusion(S; B0): offline default, questions ignored", r_offline),
        Candidate("fusion(max(S,Q); B0): questions beside, until now", r_max),
        Candidate("fusion(max(S, Q-δ); B0): per-kind offset alone", r_offset_alone, deltas),
        Candidate("fusion(S; B): questions in the chunk's BM25 alone", r_expansion),
        Candidate("**fusion(max(S, Q-0.15); B): shipped**", r_shipped, params=shipped),
        Candidate("fusion(max(S, Q-δ); B): offset refitted", r_shipped, deltas),
        Candidate("fusion(max(S, Qc-δ); B): centered question cosine", r_centered, deltas),
        Candidate("shipped + w·Qc: centered cosine as an extra signal", r_plus("Qc"), weights),
        Candidate("fusion(max(S, Q2-δ); B): mean of the top-2 questions", r_top2, deltas),
        Candidate("shipped + w·Qm: centroid of the chunk's questions", r_plus("Qm"), weights),
        Candidate(
            "x·max(S, Q-0.15) + c·C + b·B: fusion weights refitted",
            r_reweighted,
            [
                {"x": x, "c": c, "b": b}
                for x, c, b in itertools.product((0.3, 0.4, 0.5), (0.2, 0.3), (0.3, 0.4, 0.5))
            ],
        ),
        Candidate("logistic regression on every signal above", r_logreg),
        Candidate(
            "fusion(max(S, Q-hub-δ); B): hubness taken out of each question (CSLS)",
            r_hub,
            [{"delta": d} for d in (-0.6, -0.5, -0.4, -0.3, -0.2, -0.1, 0.0)],
        ),
        Candidate(
            "fusion(max(S, a·Q-δ); B): per-kind linear (Platt) calibration",
            r_linear,
            [
                {"a": a, "delta": d}
                for a in (0.8, 1.0, 1.2, 1.5)
                for d in np.round(np.arange(-0.1, 0.56, 0.05), 3).tolist()
            ],
        ),
        Candidate(
            "RRF(shipped, index-wide question list)",
            r_rrf_questions,
            [{"w": w} for w in (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)],
        ),
        Candidate(
            "shipped + b where a question > t agrees with the sentences' top n",
            r_agree,
            [
                {"b": b, "n": n, "t": t}
                for b in (0.02, 0.05, 0.1)
                for n in (3, 5, 10)
                for t in (0.5, 0.6, 0.7, 0.8)
            ],
        ),
        Candidate(
            "fusion(max(S, Q-δ) where the question shares a rare word; B): a gate",
            r_gate,
            [{"g": g, "delta": d} for g in (2.0, 3.0, 4.0) for d in (0.0, 0.05, 0.1, 0.15)],
        ),
        Candidate(
            "shipped + w·Σγ^i(Q_i-t)+: several questions of a chunk",
            r_several,
            [
                {"w": w, "g": g, "t": t}
                for w in (0.05, 0.1, 0.2, 0.3)
                for g in (0.5, 1.0)
                for t in (0.5, 0.6, 0.7)
            ],
        ),
        Candidate("shipped + w·Q: the question cosine as a fourth signal", r_plus("Q"), weights),
        Candidate("dense alone: max(S, C)", r_dense, params={"delta": None}),
        Candidate("dense alone: max(S, C, Q)", r_dense, params={"delta": 0.0}),
        Candidate("dense alone: max(S, C, Q-0.15): shipped", r_dense, params=shipped),
    ]


def competition(split: Split, points: Points, vectors: np.ndarray) -> list[str]:
    """Why the gain differs between subsets: for the asked queries of the first 100
    paragraphs, how often the best question (and the best sentence) of the whole index
    is the right paragraph's, as the index grows by the following paragraphs (more
    questions of other chunks to compete); and the shipped gain per group of queries is
    in ``gains``."""
    order = {pid: number for number, pid in enumerate(split.paragraphs)}
    asked = list(split.asked["eval"])
    right = np.asarray([order[next(iter(split.qrels[q]))] for q in asked])
    paragraph = np.asarray([order[points.documents[c]] for c in points.chunk])
    mine = right < 100
    sims = vectors[mine] @ points.vectors.T
    lines = []
    for size in sorted({n for n in (100, 150, 200, 400, 700) if n < len(order)} | {len(order)}):
        cells = []
        for kind in ("sentence", "question"):
            idx = np.nonzero((points.kind == KINDS.index(kind)) & (paragraph < size))[0]
            best = paragraph[idx[np.argmax(sims[:, idx], axis=1)]]
            cells.append(f"{kind} {np.mean(best == right[mine]):.3f}")
        lines.append(f"{size} paragraphs indexed, {mine.sum()} queries: " + ", ".join(cells))
    return lines


def gains(split: Split, evalq: dict[str, list[Query]], cut: int = 150) -> list[str]:
    """The shipped ranking against the offline one per group of asked queries: those of
    the first ``cut`` paragraphs and those of the rest, in the same index."""
    order = {pid: number for number, pid in enumerate(split.paragraphs)}
    lines = []
    for name, keep in (
        (f"the first {cut} paragraphs", lambda n: n < cut),
        ("the others", lambda n: n >= cut),
    ):
        cells = []
        for view, ranker, params in (
            ("offline", r_offline, {}),
            ("oracle", r_shipped, {"delta": QUERY_LIKE_OFFSET}),
            ("off-topic", r_shipped, {"delta": QUERY_LIKE_OFFSET}),
        ):
            queries = [q for q in evalq[view] if keep(order[next(iter(q.relevant))])]
            cells.append(f"{view} {measure(queries, ranker, params)['ndcg']:.4f}")
        lines.append(f"queries of {name} ({len(queries)}): " + ", ".join(cells))
    return lines


def study(
    split: Split, folders: dict[str, Path], embedder: Any
) -> tuple[list[tuple[str, dict[str, dict[str, float]]]], list[str]]:
    asked = list(split.asked["eval"].items())
    fitting = list(split.asked["fit"].items())
    started = time.perf_counter()
    vec_eval = np.asarray(embedder.embed([t for _, t in asked]), dtype=np.float32)
    vec_fit = np.asarray(embedder.embed([t for _, t in fitting]), dtype=np.float32)
    print(f"embedded {len(asked) + len(fitting)} queries: {time.perf_counter() - started:.0f} s")
    rel_eval = [split.qrels[q] for q, _ in asked]
    rel_fit = [split.qrels[q] for q, _ in fitting]
    points: dict[str, Points] = {}
    bm25: dict[tuple[str, str], list[dict[str, float]]] = {}
    for name in (
        "offline",
        "oracle-beside",
        "generic-beside",
        "offtopic-beside",
        "fit-beside",
        "fit-offtopic-beside",
    ):
        with KnowledgeBase.open(folders[name], env={}, embedder=embedder) as kb:
            points[name] = read_points(kb)
            if not name.startswith("fit-"):
                bm25[name, "eval"] = lexical_scores(kb, [t for _, t in asked])
            if name in ("offline", "generic-beside") or name.startswith("fit-"):
                bm25[name, "fit"] = lexical_scores(kb, [t for _, t in fitting])
    # the "question form" direction: the mean of the fitting index's questions (never the
    # asked queries)
    fit_points = points["fit-beside"]
    mean = fit_points.vectors[fit_points.kind == KINDS.index("question")].mean(axis=0)
    everything = ("sentence", "question", "content")
    offline_view = ("sentence", "content")
    shipped_view = ("question", "content")

    documents = [words(text) for text in split.paragraphs.values()]
    frequency: dict[str, int] = {}
    for seen_words in documents:
        for word in seen_words:
            frequency[word] = frequency.get(word, 0) + 1
    idf = {w: float(np.log(len(documents) / n)) for w, n in frequency.items()}

    def build(index: str, which: str, view: tuple[str, ...]) -> list[Query]:
        vectors, relevant = (vec_eval, rel_eval) if which == "eval" else (vec_fit, rel_fit)
        texts = [t for _, t in (asked if which == "eval" else fitting)]
        lexical = bm25[index if view != offline_view else "offline", which]
        return build_queries(
            points[index],
            vectors,
            relevant,
            lexical,
            bm25["offline", which],
            view,
            mean,
            texts,
            idf,
        )

    evalq = {
        "oracle": build("oracle-beside", "eval", everything),
        "generic": build("generic-beside", "eval", everything),
        "off-topic": build("offtopic-beside", "eval", everything),
        "offline": build("generic-beside", "eval", offline_view),
        "oracle instead": build("oracle-beside", "eval", shipped_view),
        "generic instead": build("generic-beside", "eval", shipped_view),
    }
    fitq = {
        "oracle": build("fit-beside", "fit", everything),
        "generic": build("generic-beside", "fit", everything),
        "off-topic": build("fit-offtopic-beside", "fit", everything),
        "offline": build("generic-beside", "fit", offline_view),
    }
    print(f"candidates built: {time.perf_counter() - started:.0f} s", flush=True)
    print("\nthe best point of each kind is the right paragraph's (oracle-beside):")
    for line in competition(split, points["oracle-beside"], vec_eval):
        print(f"- {line}")
    print("\nnDCG@10 per group of asked queries (the shipped ranking):")
    for line in gains(split, evalq):
        print(f"- {line}")
    print(flush=True)
    fitted: list[str] = []
    rows = []
    for cand in candidates():
        if cand.ranker is r_logreg:
            cand.params = fit_logreg(fitq)
            fitted.append(f"{cand.name}: {_show(cand.params)}")
        elif len(cand.grid) > 1:
            fitted.append(fit(cand, fitq))
        measured = {v: measure(qs, cand.ranker, cand.params) for v, qs in evalq.items()}
        rows.append((cand.name, measured))
        print(f"{cand.name}: {rows[-1][1]}", flush=True)
    return rows, fitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data/squad-dev"))
    parser.add_argument("--paragraphs", type=int, default=None, help="the first N paragraphs")
    parser.add_argument("--work", type=Path, default=Path("/tmp/flexmatch-oracle"))
    parser.add_argument(
        "--no-engine", action="store_true", help="run no query through the engine (show kept ones)"
    )
    args = parser.parse_args()
    work = args.work / str(args.paragraphs or "all")
    split = load_split(args.data, args.paragraphs, work)
    print(
        f"{len(split.paragraphs)} paragraphs; served {sum(map(len, split.served['eval'].values()))}"
        f" questions, asked {len(split.asked['eval'])}; fitting: served "
        f"{sum(map(len, split.served['fit'].values()))}, asked {len(split.asked['fit'])}",
        flush=True,
    )
    with FakeLLMServer() as server:
        with KnowledgeBase.open(work / "offline", env={}) as probe:
            embedder = probe.embedder
        folders = ingest_all(split, work, server, embedder)
        engine = engine_scores(split, folders, server, embedder, run=not args.no_engine)
    rows, fitted = study(split, folders, embedder)
    print("\nengine (real query path, default query settings):\n")
    print("| index | nDCG@10 | recall@5 | MRR@10 | query p50 ms |")
    print("|---|---|---|---|---|")
    for name, s in engine.items():
        print(
            f"| {name} | {s.ndcg_at_10:.4f} | {s.recall_at_5:.4f} | {s.mrr_at_10:.4f} "
            f"| {s.latency_median_ms:.1f} |"
        )
    views = ["oracle", "generic", "off-topic", "offline", "oracle instead", "generic instead"]
    print("\nrankings of the engine's candidates (nDCG@10 / recall@5 / MRR@10):\n")
    print("| ranking | " + " | ".join(views) + " |")
    print("|---|" + "---|" * len(views))
    for name, by_view in rows:
        cells = [
            f"{by_view[v]['ndcg']:.4f} / {by_view[v]['r5']:.3f} / {by_view[v]['mrr']:.3f}"
            for v in views
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nfitted on the fitting split (never on the asked queries):")
    for line in fitted:
        print(f"- {line}")


if __name__ == "__main__":
    main()
