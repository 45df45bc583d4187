"""The Python API end to end: real parsers, the real local embedding model, the embedded
store, and LLM chains through litellm against the fake server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.config import (
    LOCAL_EMBEDDING_MODEL_FP32,
    LOCAL_EMBEDDING_MODEL_INT8,
    default_embedding_model,
)
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.errors import ConfigError, ModelMismatchError
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import default_responder
from flexmatch.testing.fake_llm.text import prompt_text
from tests.conftest import llm_config, write_config

GUIDE = """# Orchard handbook

The orchard grows apples and pears on the north hill.

## Harvest

Apples are picked by hand in late September. Pears are picked two weeks later.

## Storage

Fruit is kept in a cold store at two degrees Celsius. The cold store holds forty tonnes.
"""


@pytest.fixture
def guide(tmp_path: Path) -> Path:
    path = tmp_path / "docs" / "orchard.md"
    path.parent.mkdir()
    path.write_text(GUIDE, encoding="utf-8")
    return path


def _stored(kb: KnowledgeBase) -> list[dict]:
    return [hit.payload for hit in kb.store.scroll("default", {"record": "match"})]


def test_offline_defaults_ingest_and_answer(
    tmp_path: Path, embedder: OnnxEmbedder, docs_dir: Path
) -> None:
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([docs_dir / "fake-html-cp1252.html", docs_dir / "stanley-cups.xlsx"])
        assert report.documents == 2 and not report.failed and report.usage.calls == 0
        assert (
            "no LLM configured: matching_text uses 'sentences' instead of 'questions'" in kb.notices
        )
        results = kb.query("How many Stanley Cups have the Maple Leafs won?")
    assert results[0].uri.endswith("stanley-cups.xlsx")
    assert len(results) <= 5 and results[0].qualifying_text.startswith("From stanley-cups")
    assert results[0].matched_text and results[0].signals.dense > 0.4


def test_llm_chains_store_the_servers_questions_and_context(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.ingest([guide])
        assert report.documents == 1 and kb.notices == []
        payloads = _stored(kb)
    questions = {p["matched_text"] for p in payloads if p["match_kind"] == "question"}
    assert "What does the text say about apples are picked by hand in late september?" in questions
    contexts = {p["qualifying_text"] for p in payloads if "qualifying_text" in p}
    assert (
        'This section of "Orchard handbook" covers: Apples are picked by hand in late September.'
        in contexts
    )
    calls = llm_server.calls()
    assert calls == report.usage.calls == 2  # one group per chain for the document's chunks
    assert report.llm_calls_per_chunk < 1
    assert report.usage.prompt_tokens > 0


def test_reingest_pays_nothing_twice(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        kb.ingest([guide])
        points = len(_stored(kb))
    seen = llm_server.calls()
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:  # a new process
        report = kb.ingest([guide])
        assert len(_stored(kb)) == points
    assert llm_server.calls() == seen  # unchanged: no LLM call, not even a cache lookup
    assert report.unchanged == 1 and report.documents == 0
    assert report.usage.calls == 0 and report.usage.cached_calls == 0


def test_changing_one_chain_repays_only_that_chain(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        first = kb.ingest([guide])
    questions_only = (
        "sources:\n  default:\n    matching_text: {chain: questions, params: {count: 2}}\n"
    )
    write_config(kb_dir, llm_config(llm_server, questions_only))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        second = kb.ingest([guide])
        kinds = [p["match_kind"] for p in _stored(kb)]
    assert second.changed == 1  # new chain settings: re-indexed
    assert second.usage.calls == 1  # the new question prompt: one group for the 3 chunks
    assert second.usage.cached_calls == first.chunks  # each chunk's context, unchanged
    assert kinds.count("question") <= 2 * first.chunks


def _offtopic_questions(messages: list[dict]) -> str:
    """Answers the questions prompt with one question no sentence of the guide answers."""
    prompt = prompt_text(messages)
    if '<chunk id="' not in prompt or '"questions"' not in prompt:
        return default_responder(messages)
    chunks = [int(n) for n in re.findall(r'<chunk id="(\d+)">', prompt)]
    entries = [{"chunk": n, "questions": ["Who founded the orchard?"]} for n in chunks]
    return json.dumps({"chunks": entries})


def test_questions_are_indexed_beside_the_sentences(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    llm_server.responder = _offtopic_questions
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        kb.ingest([guide])
        payloads = _stored(kb)
        results = kb.query("Fruit is kept in a cold store at what temperature?")
    by_kind: dict[str, set[str]] = {}
    for p in payloads:
        by_kind.setdefault(p["match_kind"], set()).add(p["matched_text"])
    assert by_kind["question"] == {"Who founded the orchard?"}
    sentence = "Orchard handbook › Storage: Fruit is kept in a cold store at two degrees Celsius."
    assert sentence in by_kind["sentence"]  # as the ``sentences`` chain writes it
    assert len(by_kind["content"]) == 3  # and each chunk's text
    # a query phrased like a sentence of the chunk, not like its question, finds the chunk
    # by that sentence
    assert results[0].heading_path[-1] == "Storage"
    assert results[0].matched_text == sentence


def test_questions_without_the_sentences_when_asked(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        first = kb.ingest([guide])
        beside = [p["match_kind"] for p in _stored(kb)]
    fewer = (
        "sources:\n  default:\n"
        "    matching_text: {chain: questions, params: {beside_sentences: false}}\n"
    )
    write_config(kb_dir, llm_config(llm_server, fewer))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        second = kb.ingest([guide])
        kinds = [p["match_kind"] for p in _stored(kb)]
    assert "sentence" in beside
    assert set(kinds) == {"question", "content"}  # the questions and the chunk only
    assert kinds.count("question") == beside.count("question")
    # the setting changes what is indexed, so the document is indexed again, but never
    # the questions asked: every chunk's questions come from the cache
    assert second.changed == 1
    assert second.usage.calls == 0
    assert second.usage.cached_calls == 2 * first.chunks  # questions and context


def test_changed_document_replaces_its_chunks(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder
) -> None:
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        kb.ingest([guide])
        guide.write_text("# Orchard handbook\n\nThe orchard now grows only cherries.\n")
        kb.ingest([guide])
        contents = {p["content"] for p in _stored(kb) if "content" in p}
    assert contents == {"The orchard now grows only cherries."}


def test_malformed_llm_output_is_handled(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    llm_server.malformed = True
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.ingest([guide])
        payloads = _stored(kb)
    assert report.documents == 1 and not report.failed
    for payload in payloads:  # nothing of the garbage is stored as a question
        assert payload["match_kind"] in ("content", "question", "sentence")  # sentences beside
        assert "{broken" not in payload["matched_text"]
        assert len(payload["matched_text"]) <= 300 or payload["match_kind"] == "content"


def test_llm_failure_is_reported_per_document(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    llm_server.fail_next = [500] * 50
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server).replace("llm_max_retries: 3", "llm_max_retries: 1"))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.ingest([guide])
    assert report.documents == 0 and len(report.failed) == 1
    assert "failed after retries" in report.failed[0].error


def test_query_rewrite_and_llm_rerank(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server, "query:\n  reranker: llm-rerank\n"))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        kb.ingest([guide])
        llm_server.reset()
        results = kb.query("cold store temperature", top_n=2)
    prompts = [json.dumps(r.body) for r in llm_server.requests_to("/chat/completions")]
    assert any("<query>" in p and "<candidate " not in p for p in prompts)  # the rewrite
    assert any("<candidate index=" in p for p in prompts)  # the rerank
    assert "cold store" in results[0].content and len(results) == 2
    assert 0.0 <= results[0].score <= 1.0


def test_cohere_reranker_against_local_server(
    tmp_path: Path, guide: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(
        kb_dir,
        "query:\n  reranker:\n    chain: cohere\n"
        f"    params: {{api_key: test, base_url: '{llm_server.root_url}'}}\n",
    )
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        kb.ingest([guide])
        results = kb.query("Which fruit is picked by hand in September?", top_n=3)
    assert llm_server.calls("/v2/rerank") == 1
    assert "picked by hand" in results[0].content
    assert results[0].score >= results[-1].score


def test_litellm_embedding_model_and_mismatch(
    tmp_path: Path, guide: Path, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    base = f"  embedding_api_base: {llm_server.base_url}\n  embedding_api_key: k\n"
    write_config(kb_dir, f"models:\n  embedding: openai/fake-embed\n{base}")
    with KnowledgeBase.open(kb_dir, env={}) as kb:
        kb.ingest([guide])
        assert kb.query("cold store")[0].content.startswith("Fruit is kept in a cold store")
    assert llm_server.calls("/embeddings") >= 2
    write_config(kb_dir, f"models:\n  embedding: openai/other-embed\n{base}")
    with (
        KnowledgeBase.open(kb_dir, env={}) as kb,
        pytest.raises(ModelMismatchError, match="fake-embed"),
    ):
        kb.ingest([guide])


def test_unknown_source_is_named(tmp_path: Path, guide: Path, embedder: OnnxEmbedder) -> None:
    kb = KnowledgeBase.open(tmp_path / "kb", embedder=embedder)
    with kb, pytest.raises(ConfigError, match="no source named 'web'"):
        kb.ingest([guide], source="web")


def test_jsonl_corpus_keeps_ids_and_metadata(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"_id": "a1", "title": "Alpha", "text": "Alpha particles are helium nuclei.", "year": 1899},
        {"id": "b2", "title": "Beta", "text": "Beta particles are electrons."},
        {"_id": "c3", "title": "Empty", "text": ""},
    ]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([corpus])
        results = kb.query("What are alpha particles?")
    assert report.documents == 2 and len(report.failed) == 2
    assert "field 'text' is missing or empty" in report.failed[0].error
    assert "not valid JSON" in report.failed[1].error
    assert results[0].document_id == "a1" and results[0].metadata == {"year": 1899}


def test_upload_with_a_given_id_replaces_that_document(
    tmp_path: Path, embedder: OnnxEmbedder, docs_dir: Path
) -> None:
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        first = kb.run_sync(
            kb.aingest_upload(
                "memo.pdf",
                (docs_dir / "pdf_fake-memo.pdf").read_bytes(),
                document_id="memo",
                metadata={"team": "ops"},
            )
        )
        assert first.added == 1 and kb.get_document("memo").document.metadata["team"] == "ops"
        again = kb.run_sync(
            kb.aingest_upload(
                "memo.md", b"# Memo\n\nAll blankets were returned.", document_id="memo"
            )
        )
        assert again.changed == 1
        assert kb.get_document("memo").chunks[0].content == "All blankets were returned."
        bad = kb.run_sync(kb.aingest_upload("x.bin", b"\x00\x01"))
        assert (
            "unsupported file type '.bin'" in bad.failed[0].error
            and "/tmp" not in bad.failed[0].error
        )
        similar = kb.run_sync(kb.asimilar("blankets returned", top_n=1))
    assert similar[0].document_id == "memo" and similar[0].uri == "upload:memo.md"


def test_metadata_change_reindexes(tmp_path: Path, guide: Path, embedder: OnnxEmbedder) -> None:
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        data = guide.read_bytes()
        kb.run_sync(kb.aingest_upload("g.md", data, document_id="g", metadata={"v": 1}))
        same = kb.run_sync(kb.aingest_upload("g.md", data, document_id="g", metadata={"v": 1}))
        other = kb.run_sync(kb.aingest_upload("g.md", data, document_id="g", metadata={"v": 2}))
        results = kb.query("cold store", filters={"document_id": "g"})
    assert same.unchanged == 1 and other.changed == 1
    assert results[0].metadata["v"] == 2


def test_a_config_naming_no_model_keeps_the_stores(tmp_path: Path, guide: Path) -> None:
    """A store built with the fp32 model (the default before int8, and still where the CPU
    has no VNNI) is searched and grown with fp32 vectors while the config names no model;
    naming another one is refused; a new knowledge base gets the machine's default."""
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, f"models:\n  embedding: {LOCAL_EMBEDDING_MODEL_FP32}\n")
    with KnowledgeBase.open(kb_dir, env={}) as kb:
        kb.ingest([guide])
    write_config(kb_dir, "sources:\n  default: {}\n")  # names no embedding model
    with KnowledgeBase.open(kb_dir, env={}) as kb:
        assert kb.embedder.name == LOCAL_EMBEDDING_MODEL_FP32
        guide.write_text(GUIDE + "\nThe press room opens in October.\n", encoding="utf-8")
        assert kb.ingest([guide]).changed == 1
        assert "press room" in kb.query("When does the press room open?")[0].content
    write_config(kb_dir, f"models:\n  embedding: {LOCAL_EMBEDDING_MODEL_INT8}\n")
    with (
        KnowledgeBase.open(kb_dir, env={}) as kb,
        pytest.raises(ModelMismatchError, match="local/all-MiniLM-L6-v2'"),
    ):
        guide.write_text(GUIDE, encoding="utf-8")
        kb.ingest([guide])
    with KnowledgeBase.open(tmp_path / "new", env={}) as kb:
        assert kb.embedder.name == default_embedding_model()
