"""Questions can only help: a question's cosine is calibrated against the other kinds
(``points.calibrated``) wherever the engine compares them, and its words join the chunk's
BM25 text (``points.lexical_text``); a knowledge base without questions ranks as before."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from flexmatch import KnowledgeBase
from flexmatch.config import ChainRef, KBConfig, QueryConfig
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.points import (
    QUERY_LIKE_KINDS,
    QUERY_LIKE_OFFSET,
    QUESTION_KINDS,
    calibrated,
    lexical_text,
    on_topic,
)
from flexmatch.models import MatchingText
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import default_responder
from flexmatch.testing.fake_llm.text import prompt_text

QUERY = "When does the harbour office open?"
RECORDS = [
    # answers the query, in words unlike it (sentence cosine ~0.43)
    {"id": "harbour", "title": "Moorings", "text": "Mooring desk hours start at six each morning."},
    # answers something else; its question has the query's form (cosine ~0.52)
    {"id": "bakery", "title": "Mill Street", "text": "The bakery on Mill Street sells rye bread."},
]
# what the LLM "writes" for each chunk, by a word of its text
QUESTIONS = {
    # the second is about something else altogether (an answer meant for another chunk)
    "Mooring": ["Where do boats tie up overnight?", "Who painted the Mona Lisa?"],
    "bakery": ["When does the bakery open?", "Which bread do bakers in the village sell?"],
}
_CHUNK = re.compile(r'<chunk id="(\d+)">(.*?)</chunk>', re.DOTALL)


def _respond(messages: list[dict]) -> str:
    prompt = prompt_text(messages)
    if '<chunk id="' not in prompt or '"questions"' not in prompt:
        return default_responder(messages)
    entries = [
        {
            "chunk": int(match.group(1)),
            "questions": next((q for word, q in QUESTIONS.items() if word in match.group(2)), []),
        }
        for match in _CHUNK.finditer(prompt)
    ]
    return json.dumps({"chunks": entries})


def _open(folder: Path, embedder: OnnxEmbedder, server: FakeLLMServer | None) -> KnowledgeBase:
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    settings: dict = {"query": {"query_transform": "identity"}}
    if server is not None:
        server.responder = _respond
        settings["models"] = {"llm": "openai/fake", "llm_api_base": server.base_url}
        settings["models"]["llm_api_key"] = "k"
        settings["sources"] = {"default": {"matching_text": "questions"}}
    kb = KnowledgeBase.open(
        folder / "kb", config=KBConfig.model_validate(settings), env={}, embedder=embedder
    )
    kb.ingest([corpus])
    return kb


@pytest.fixture(scope="module")
def with_questions(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder, _llm_server: FakeLLMServer
):
    _llm_server.reset()
    kb = _open(tmp_path_factory.mktemp("questions"), embedder, _llm_server)
    yield kb
    kb.close()
    _llm_server.reset()


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder):
    kb = _open(tmp_path_factory.mktemp("offline"), embedder, None)
    yield kb
    kb.close()


def _best_per_kind(kb: KnowledgeBase, vector: np.ndarray) -> dict[str, dict[str, float]]:
    """Each chunk's best raw cosine per match kind, from the stored vectors."""
    best: dict[str, dict[str, float]] = {}
    rows = kb.store.scroll_vectors(
        "default", {"record": "match"}, fields=("document_id", "match_kind")
    )
    for hit, stored in rows:
        kinds = best.setdefault(str(hit.payload["document_id"]), {})
        kind = str(hit.payload["match_kind"])
        kinds[kind] = max(kinds.get(kind, -1.0), float(np.dot(vector, stored)))
    return best


def test_calibration_and_lexical_text_treat_only_query_like_kinds_apart() -> None:
    assert set(QUERY_LIKE_KINDS) <= set(QUESTION_KINDS)
    assert calibrated(0.8, "question") == pytest.approx(0.8 - QUERY_LIKE_OFFSET)
    assert calibrated(0.8, "sentence") == 0.8 and calibrated(0.8, "content") == 0.8
    assert calibrated(0.8, "learned") == pytest.approx(0.8 - QUERY_LIKE_OFFSET)
    texts = [
        ("sentence", "Ships dock here."),
        ("question", "Where do ships dock?"),
        ("learned", "harbour berths"),
    ]
    assert lexical_text("Ships dock here.", texts) == (
        "Ships dock here.\nWhere do ships dock?\nharbour berths"
    )
    assert lexical_text("Ships dock here.", texts[:1]) == "Ships dock here."


def test_a_question_of_the_wrong_chunk_no_longer_outranks_the_answering_sentence(
    with_questions: KnowledgeBase, embedder: OnnxEmbedder
) -> None:
    vector = np.asarray(embedder.embed([QUERY])[0])
    best = _best_per_kind(with_questions, vector)
    # the hand-built case: raw, the wrong chunk's question beats the answering chunk
    answering = max(best["harbour"]["sentence"], best["harbour"]["content"])
    assert best["bakery"]["question"] > answering > best["bakery"]["question"] - 0.15
    assert max(best["bakery"]["sentence"], best["bakery"]["content"]) < answering
    dense = QueryConfig(retrieval="dense", reranker=ChainRef(chain="none"))
    default = with_questions.config.query
    with_questions.use_query_config(dense)
    try:
        results = with_questions.query(QUERY, top_n=2)
    finally:
        with_questions.use_query_config(default)
    assert [r.document_id for r in results] == ["harbour", "bakery"]
    assert results[1].signals.question == pytest.approx(
        best["bakery"]["question"] - QUERY_LIKE_OFFSET, abs=1e-4
    )


def test_signals_are_the_calibrated_best_of_each_kind(
    with_questions: KnowledgeBase, offline: KnowledgeBase, embedder: OnnxEmbedder
) -> None:
    vector = np.asarray(embedder.embed([QUERY])[0])
    for kb in (with_questions, offline):
        best = _best_per_kind(kb, vector)
        for result in kb.query(QUERY, top_n=2):
            kinds = best[result.document_id]
            question = max(
                calibrated(score, kind) for kind, score in kinds.items() if kind != "content"
            )
            signals = result.signals
            assert signals.question == pytest.approx(question, abs=1e-4)
            assert signals.content == pytest.approx(kinds["content"], abs=1e-4)
            assert signals.dense == pytest.approx(max(question, kinds["content"]), abs=1e-4)
    # without questions, nothing is calibrated: the best sentence's cosine as it is
    assert all("question" not in kinds for kinds in _best_per_kind(offline, vector).values())


def test_a_question_s_words_find_its_chunk_by_bm25(
    with_questions: KnowledgeBase, offline: KnowledgeBase
) -> None:
    lexical = QueryConfig(retrieval="lexical", reranker=ChainRef(chain="none"))
    default = offline.config.query
    for kb in (with_questions, offline):
        kb.use_query_config(lexical)
    try:
        # "boats" and "overnight" are only in the harbour chunk's question
        assert [r.document_id for r in with_questions.query("boats overnight")] == ["harbour"]
        assert offline.query("boats overnight") == []
        # the chunk text itself is still what a result shows
        shown = with_questions.query("boats overnight")[0]
        assert shown.content == RECORDS[0]["text"]
    finally:
        for kb in (with_questions, offline):
            kb.use_query_config(default)


def test_a_generated_question_unlike_its_chunk_is_not_stored(
    with_questions: KnowledgeBase,
) -> None:
    rows = with_questions.store.scroll_vectors(
        "default", {"record": "match"}, fields=("document_id", "match_kind", "matched_text")
    )
    questions = {
        str(hit.payload["matched_text"])
        for hit, _ in rows
        if hit.payload["match_kind"] == "question"
    }
    assert "Where do boats tie up overnight?" in questions
    assert "When does the bakery open?" in questions
    assert "Who painted the Mona Lisa?" not in questions


def test_on_topic_keeps_all_but_generated_texts_far_from_the_chunk() -> None:
    content = MatchingText(text="chunk", kind="content")
    near = MatchingText(text="near", kind="question")
    far = MatchingText(text="far", kind="question")
    sentence = MatchingText(text="a sentence", kind="sentence")
    pairs = [(content, [2.0, 0.0]), (near, [0.6, 0.8]), (far, [0.1, 1.0]), (sentence, [0.0, 1.0])]
    # cosines to the chunk text: near 0.6, far ~0.0995 (below 0.2), a sentence is never checked
    assert [m.text for m, _ in on_topic(pairs)] == ["chunk", "near", "a sentence"]
    assert on_topic(pairs[1:]) == pairs[1:]  # no chunk text to compare with: all kept


def test_signals_are_the_same_when_each_is_searched_for(
    with_questions: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the first stage's hits already said equals what completion searches find:
    the whole question half, then a chunk's sentences where its best was a question."""
    from flexmatch.engine.query import search

    known = with_questions.query(QUERY, top_n=2)
    monkeypatch.setattr(search, "seen", lambda variants: {})
    searched = with_questions.query(QUERY, top_n=2)
    assert [r.signals for r in searched] == [r.signals for r in known]
    assert [r.matched_text for r in searched] == [r.matched_text for r in known]
