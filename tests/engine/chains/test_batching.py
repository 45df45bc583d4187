"""Fewer LLM calls than chunks: chunks of concurrent documents asked about in groups, each
chunk's answer cached on its own, a chunk a group answer left out asked again alone."""

from __future__ import annotations

import json
from pathlib import Path

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.llm import LLM
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import default_responder
from tests.conftest import llm_config, write_config


def _docs(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"note{i}.md"
        path.write_text(f"# Note {i}\n\nGate code {1000 + i} opens the gate of note {i}.\n")
        paths.append(path)
    return paths


def _questions(kb: KnowledgeBase) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for record in kb.list_documents():
        for chunk in kb.get_document(record.id).chunks:
            found[record.title] = [m.text for m in chunk.matching_texts if m.kind == "question"]
    return found


def test_one_chunk_documents_cost_under_one_call_per_chunk(
    tmp_path: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    docs = _docs(tmp_path / "docs", 16)
    write_config(tmp_path / "kb", llm_config(llm_server))
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        report = kb.ingest(docs)
        assert report.added == 16 and report.chunks == 16
        # questions: groups of 4, context: groups of 8, filled across documents: 6 calls
        # when every document arrives within the grouping window (0.1 s), a few more when
        # a loaded machine spreads them out; 32 (two per chunk) without grouping
        assert report.usage.calls == llm_server.successful_calls() < 16
        assert report.llm_calls_per_chunk < 1
        questions = _questions(kb)
        for i in range(16):  # every chunk got questions about its own text
            assert any(str(1000 + i) in q for q in questions[f"Note {i}"]), questions[f"Note {i}"]
        contexts = {kb.get_document(r.id).chunks[0].qualifying_text for r in kb.list_documents()}
        assert 'This section of "Note 3" covers: Gate code 1003 opens' in " ".join(contexts)


def test_answers_are_cached_per_chunk_whatever_the_grouping(
    tmp_path: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    docs = _docs(tmp_path / "docs", 6)
    write_config(tmp_path / "kb", llm_config(llm_server))
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        kb.ingest(docs)
        docs[2].write_text("# Note 2\n\nGate code 4242 now opens the gate of note 2.\n")
        llm_server.reset()
        report = kb.ingest(docs)
    assert report.changed == 1 and report.unchanged == 5
    assert llm_server.successful_calls() == 2  # only note 2's chunk, once per chain
    prompts = [json.dumps(r.body) for r in llm_server.requests_to("/chat/completions")]
    assert all("4242" in p and "1001" not in p for p in prompts)


def test_a_chunk_left_out_of_a_group_answer_is_asked_alone(
    tmp_path: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    def forgetful(messages: list[dict]) -> str:
        answer = default_responder(messages)
        data = json.loads(answer) if answer.startswith("{") else None
        if isinstance(data, dict) and len(data.get("chunks", [])) > 1:
            data["chunks"] = [c for c in data["chunks"] if c["chunk"] != 2]  # skip chunk 2
            return json.dumps(data)
        return answer

    llm_server.responder = forgetful
    docs = _docs(tmp_path / "docs", 4)
    write_config(tmp_path / "kb", llm_config(llm_server))
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        report = kb.ingest(docs)
        questions = _questions(kb)
    assert report.added == 4
    assert all(questions[f"Note {i}"] for i in range(4))  # the skipped one asked again
    assert llm_server.successful_calls() == 4  # 2 groups + 2 chunks asked alone


def test_a_one_chunk_prompt_still_works(
    tmp_path: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    """A knowledge base's own questions prompt written for one chunk (``chunk``, not
    ``chunks``): one call per chunk, as before."""
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server))
    (kb_dir / "prompts").mkdir()
    (kb_dir / "prompts" / "questions.j2").write_text(
        "Write {{ params.count }} questions.\n<chunk>{{ chunk.text | fence }}</chunk>\n"
        'Answer with JSON: {"questions": ["..."]}'
    )
    docs = _docs(tmp_path / "docs", 3)
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        kb.ingest(docs)
        questions = _questions(kb)
    singles = [
        r for r in llm_server.requests_to("/chat/completions") if '<chunk id="' not in str(r.body)
    ]
    assert len(singles) == 3 and all(questions[f"Note {i}"] for i in range(3))


def test_prompt_prefixes_are_marked_for_anthropic_caching_only() -> None:
    prompt = 'Instructions and the document. <chunk id="1">text</chunk>'
    cut = prompt.find("<chunk")
    claude = LLM.request_messages("anthropic/claude-3-5-haiku-20241022", prompt, cut)
    blocks = claude[0]["content"]
    assert blocks[0]["cache_control"] == {"type": "ephemeral"}
    assert blocks[0]["text"] + blocks[1]["text"] == prompt
    assert LLM.request_messages("openai/gpt-4o-mini", prompt, cut)[0]["content"] == prompt


def test_chunk_text_is_embedded_while_the_llm_writes(
    tmp_path: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    """The server holds every answer until the embedder has been handed a chunk's own
    text: an ingest that embedded it only after the answers would make each wait time out.
    The stored vectors are the same as embedding everything at the end."""
    import threading

    docs = _docs(tmp_path / "docs", 4)
    seen = threading.Event()
    waits: list[bool] = []

    class Watching:
        name, dimension = embedder.name, embedder.dimension

        def embed(self, texts: list[str]) -> list[list[float]]:
            if any("opens the gate of note" in text for text in texts):
                seen.set()
            return embedder.embed(texts)

    def held(messages: list[dict]) -> str:
        waits.append(seen.wait(timeout=5))
        return default_responder(messages)

    llm_server.responder = held
    write_config(tmp_path / "kb", llm_config(llm_server))
    with KnowledgeBase.open(tmp_path / "kb", embedder=Watching(), env={}) as kb:
        report = kb.ingest(docs)
        assert report.added == 4 and not report.failed
        assert waits and all(waits)
        chunk = kb.get_document(kb.list_documents()[0].id).chunks[0]
        texts = [m.text for m in chunk.matching_texts]
        # the questions beside the chunk's sentences (known, like its text, before the
        # answers) and the chunk
        assert {m.kind for m in chunk.matching_texts} == {"question", "sentence", "content"}
        stored = kb.store.scroll("default", {"chunk_id": chunk.id, "record": "match"})
        assert sorted(hit.payload["matched_text"] for hit in stored) == sorted(texts)
        for text, vector in zip(texts, embedder.embed(texts), strict=True):
            best = kb.store.search("default", vector, 1, {"chunk_id": chunk.id})[0]
            assert best.payload["matched_text"] == text and best.score > 0.9999
