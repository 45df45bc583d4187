"""Hybrid retrieval, filters, thresholds, explanations and the offline reranker."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.config import ChainRef, KBConfig, QueryConfig
from flexmatch.engine.chains import ChainContext, Reranker, build_chain
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.models import SearchResult, Signals
from tests.conftest import run

RECORDS = [
    {
        "id": "r1",
        "title": "Harbour fees",
        "text": "Mooring costs twelve euros per night.",
        "tags": ["port", "money"],
        "category": "travel",
    },
    {
        "id": "r2",
        "title": "Harbour hours",
        "text": "The harbour office opens at six.",
        "tags": ["port"],
        "category": "travel",
    },
    {
        "id": "r3",
        "title": "Orchard",
        "text": "The XJ-9000 tractor harvests apples in autumn.",
        "tags": ["farm"],
        "category": "farming",
    },
]


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder):
    folder = tmp_path_factory.mktemp("retrieval")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n")
    base = KnowledgeBase.open(folder / "kb", env={}, embedder=embedder)
    base.ingest([corpus])
    yield base
    base.close()


def _ids(results: list[SearchResult]) -> list[str]:
    return [r.document_id for r in results]


def test_metadata_filters(kb: KnowledgeBase) -> None:
    assert _ids(kb.query("harbour", filters={"tags": "money"})) == ["r1"]
    assert set(_ids(kb.query("harbour", filters={"category": "travel"}))) == {"r1", "r2"}
    assert _ids(kb.query("harbour", filters={"document_id": ["r3"]})) == ["r3"]
    assert kb.query("harbour", filters={"source": "elsewhere"}) == []


def test_lexical_signal_finds_rare_tokens(kb: KnowledgeBase) -> None:
    kb.use_query_config(QueryConfig(retrieval="lexical", reranker=ChainRef(chain="none")))
    try:
        assert _ids(kb.query("XJ-9000"))[0] == "r3"
    finally:
        kb.use_query_config(KBConfig().query)


def test_every_candidate_has_every_signal(kb: KnowledgeBase) -> None:
    results = kb.query("How much is mooring per night?", top_n=3)
    first = results[0].signals
    assert results[0].document_id == "r1"
    assert first.dense is not None and first.content is not None and first.question is not None
    assert first.lexical is not None and first.lexical > 0 and first.dense_rank == 1
    assert first.first_stage is not None and first.rerank is not None
    assert all(r.signals.content is not None for r in results)


def test_a_match_kind_filtered_out_gives_no_signal(kb: KnowledgeBase) -> None:
    """A kind the caller's ``match_kind`` filter leaves out is not searched when the
    candidates' signals are completed either, so the reranker cannot bring it back
    (what ``flexmatch eval --ablate`` switches signals off with)."""
    question = "How much is mooring per night?"
    no_content = kb.query(question, filters={"match_kind": ["question", "sentence"]})
    assert no_content and all(r.signals.content is None for r in no_content)
    assert all(r.signals.question is not None for r in no_content)
    only_content = kb.query(question, filters={"match_kind": "content"})
    assert only_content and all(r.signals.question is None for r in only_content)
    assert all(r.signals.content is not None for r in only_content)


def test_min_score_threshold(kb: KnowledgeBase) -> None:
    kb.use_query_config(KBConfig().query.model_copy(update={"min_score": 0.6}))
    try:
        results = kb.query("How much is mooring per night?")
        assert _ids(results) == ["r1"] and results[0].signals.dense >= 0.6
        assert kb.query("quantum chromodynamics of neutron stars") == []
    finally:
        kb.use_query_config(KBConfig().query)


def test_fusion_reranker_uses_all_signals() -> None:
    reranker = build_chain(ChainRef(chain="fusion-rerank"), Reranker, ChainContext())

    def candidate(key: str, question: float, content: float, lexical: float) -> SearchResult:
        return SearchResult(
            chunk_id=key,
            document_id=key,
            uri="",
            source="s",
            title="",
            heading_path=[],
            content="",
            qualifying_text="",
            matched_text="",
            score=0.0,
            signals=Signals(question=question, content=content, lexical=lexical),
        )

    ranked = asyncio.run(
        reranker.run(
            "q",
            [
                candidate("weak", 0.50, 0.40, 1.0),
                candidate("lexical-only", 0.50, 0.45, 9.0),
                candidate("strong", 0.80, 0.70, 8.0),
            ],
        )
    )
    assert [r.chunk_id for r in ranked] == ["strong", "lexical-only", "weak"]
    assert ranked[0].score == pytest.approx(0.4 + 0.3 + 0.3 * 7 / 8)
    assert ranked[0].signals.rerank == ranked[0].score
    assert ranked[-1].score == pytest.approx(0.0)


def test_eval_command_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "tiny"
    (data / "qrels").mkdir(parents=True)
    (data / "corpus.jsonl").write_text(
        "\n".join(
            json.dumps({"_id": r["id"], "title": r["title"], "text": r["text"]}) for r in RECORDS
        )
    )
    queries = [
        ("q1", "What does mooring cost?", "r1"),
        ("q2", "When does the harbour office open?", "r2"),
        ("q3", "Which machine harvests apples?", "r3"),
    ]
    (data / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": q, "text": t}) for q, t, _ in queries)
    )
    (data / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _, d in queries)
    )
    result = run("eval", str(data), "--baselines", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["setup"]: row for row in json.loads(result.stdout)}
    assert set(rows) == {"default", "bm25", "dense-passages", "rrf-passages"}
    assert rows["default"]["ndcg_at_10"] == pytest.approx(1.0) and rows["default"]["queries"] == 3
    assert all(0 <= row["mrr_at_10"] <= 1 for row in rows.values())
    missing = run("eval", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "not a BEIR data set" in missing.stderr


class _CountingStore:
    """The knowledge base's real store, with its calls counted (round trips to Qdrant)."""

    def __init__(self, store: object) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        attribute = getattr(self._store, name)
        if callable(attribute):
            self.calls.append(name)
        return attribute


def test_a_query_costs_five_round_trips_whatever_its_variants(
    kb: KnowledgeBase, embedder: OnnxEmbedder
) -> None:
    """The BM25 search (run while the query is embedded), one batch of dense searches,
    one indexed look-up of unfinished documents (not a read of every hit's record), one
    batch completing the signals, one read of the chunks: not a call per variant and
    signal."""
    from flexmatch.engine.query import Retriever

    counting = _CountingStore(kb.store)
    retriever = Retriever(counting, "default", QueryConfig(retrieval="hybrid"))  # type: ignore[arg-type]
    texts = ["harbour fees", "what does mooring cost?", "port prices per night"]
    lexical = retriever.lexical_search(texts, 10, None)
    results = retriever.retrieve(texts, embedder.embed(texts), 10, None, lexical)
    assert results and results[0].content and results[0].signals.lexical is not None
    assert counting.calls == ["search_batch"] * 2 + ["scroll", "search_batch", "retrieve"]


def test_ranking_on_signals_reads_only_the_chunks_kept(
    kb: KnowledgeBase, embedder: OnnxEmbedder
) -> None:
    """``search``: candidates come with ids, scores and signals; ``read`` then reads the
    chunks (and best matches) of only those kept, and they equal a full read."""
    from flexmatch.engine.query import Candidate, Retriever

    counting = _CountingStore(kb.store)
    retriever = Retriever(counting, "default", QueryConfig(retrieval="hybrid"))  # type: ignore[arg-type]
    texts = ["what does mooring cost?"]
    vectors = embedder.embed(texts)
    full = Retriever(kb.store, "default", QueryConfig()).retrieve(texts, vectors, 10, None)
    light = retriever.retrieve(texts, vectors, 10, None)  # search and read: the same
    assert [r.model_dump() for r in light] == [r.model_dump() for r in full]
    counting.calls.clear()
    bare = retriever.search(texts, vectors, 10, None)
    assert "retrieve" not in counting.calls
    assert len(bare) == len(full) and all(isinstance(c, Candidate) for c in bare)
    asked: list[list[str]] = []
    real_retrieve = kb.store.retrieve
    kb.store.retrieve = lambda tenant, ids: asked.append(ids) or real_retrieve(tenant, ids)  # type: ignore[method-assign]
    kept = retriever.read(bare[:2])
    # one look-up: two carriers, two best matches, and their documents' records
    assert len(asked) == 1 and len(asked[0]) <= 6
    assert [r.model_dump() for r in kept] == [r.model_dump() for r in full[:2]]


def test_a_crowded_content_search_is_redone_chunk_by_chunk(
    kb: KnowledgeBase, embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidates' content points come from one search; when its answer is full
    (more versions than it had room for), each chunk's own is searched: same signals.
    (And the same as when the first stage's dense hits already held them.)"""
    from flexmatch.engine.query import complete, search

    texts = ["what does mooring cost?"]
    vectors = embedder.embed(texts)
    settings = QueryConfig(retrieval="hybrid")
    normal = search.Retriever(kb.store, "default", settings).retrieve(texts, vectors, 10, None)
    monkeypatch.setattr(complete, "content_room", lambda chunks: 1)
    monkeypatch.setattr(search, "seen", lambda variants: {})  # every signal searched for
    counting = _CountingStore(kb.store)
    crowded = search.Retriever(counting, "default", settings).retrieve(texts, vectors, 10, None)  # type: ignore[arg-type]
    # BM25, dense, completion, then one by one
    assert counting.calls.count("search_batch") == 4
    assert [r.model_dump() for r in crowded] == [r.model_dump() for r in normal]
    assert any(r.signals.content is not None for r in crowded)


def test_a_query_ranked_on_signals_equals_one_that_reads_every_chunk(
    kb: KnowledgeBase,
) -> None:
    """The fusion reranker ranks on signals, so the query path reads only the top-N
    chunks; the answer equals that of a read of every candidate first."""
    from flexmatch.engine.chains.reranker.fusion import FusionRerank

    question = "what does mooring cost?"
    lazy = kb.query(question, top_n=3)
    FusionRerank.reads_content = True  # the same reranker, made to read every chunk first
    try:
        eager = kb.query(question, top_n=3)
    finally:
        FusionRerank.reads_content = False
    assert lazy and [r.model_dump() for r in lazy] == [r.model_dump() for r in eager]


def test_the_chunk_text_is_stored_once_per_chunk(kb: KnowledgeBase) -> None:
    """Only a chunk's carrier point holds its text; the others hold their matching text."""
    points = [h.payload for h in kb.store.scroll("default", {"record": "match"})]
    carriers = [p for p in points if "content" in p]
    assert len(points) > len(carriers) == len({p["chunk_id"] for p in points})
    assert all(p["matched_text"] for p in points)
