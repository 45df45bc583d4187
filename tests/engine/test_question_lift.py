"""End to end, with the default query settings (hybrid, DBSF, ``fusion-rerank``): a
question as a user would ask it lifts the chunk it was written for above one the
offline index ranks first, and questions about something else altogether (which the
on-topic rule does not store) leave the ranking exactly as the offline index has it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.config import KBConfig
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import default_responder
from flexmatch.testing.fake_llm.text import prompt_text

RECORDS = [
    {"id": "harbour", "title": "Moorings", "text": "Mooring desk hours start at six each morning."},
    {
        "id": "library",
        "title": "Reading room",
        "text": "The reading room closes at nine in the evening.",
    },
    {"id": "bakery", "title": "Mill Street", "text": "The bakery on Mill Street sells rye bread."},
    {"id": "museum", "title": "Gallery", "text": "Admission to the gallery is free on Sundays."},
]
# what the LLM "writes" per chunk, by a word of its text: questions as users ask them...
ORACLE = {
    "Mooring": ["When does the harbour office open?"],
    "reading room": ["When does the library close?"],
    "bakery": ["Which bread does the bakery sell?"],
    "gallery": ["How much does the museum cost?"],
}
# ... and questions about nothing in the corpus
OFF_TOPIC = {
    "Mooring": ["Who painted the Mona Lisa?"],
    "reading room": ["How tall is Mount Everest?"],
    "bakery": ["Which planet has the most moons?"],
    "gallery": ["Who wrote the Odyssey?"],
}
QUERY = "When does it open?"  # offline: the library first, the harbour third
_CHUNK = re.compile(r'<chunk id="(\d+)">(.*?)</chunk>', re.DOTALL)


def _responder(table: dict[str, list[str]]) -> Callable[[list[dict]], str]:
    def respond(messages: list[dict]) -> str:
        prompt = prompt_text(messages)
        if '<chunk id="' not in prompt or '"questions"' not in prompt:
            return default_responder(messages)
        entries = [
            {
                "chunk": int(match.group(1)),
                "questions": next((q for word, q in table.items() if word in match.group(2)), []),
            }
            for match in _CHUNK.finditer(prompt)
        ]
        return json.dumps({"chunks": entries})

    return respond


@pytest.fixture(scope="module")
def kbs(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder, _llm_server: FakeLLMServer
) -> Iterator[dict[str, KnowledgeBase]]:
    folder = tmp_path_factory.mktemp("lift")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    opened: dict[str, KnowledgeBase] = {}
    for name, table in (("offline", None), ("oracle", ORACLE), ("off-topic", OFF_TOPIC)):
        settings: dict = {"query": {"query_transform": "identity"}}
        if table is not None:
            _llm_server.responder = _responder(table)
            settings["models"] = {
                "llm": "openai/fake",
                "llm_api_base": _llm_server.base_url,
                "llm_api_key": "k",
            }
            settings["sources"] = {"default": {"matching_text": "questions"}}
        kb = KnowledgeBase.open(
            Path(folder / name), config=KBConfig.model_validate(settings), env={}, embedder=embedder
        )
        kb.ingest([corpus])
        opened[name] = kb
    _llm_server.reset()
    yield opened
    for kb in opened.values():
        kb.close()


def test_a_question_as_users_ask_it_lifts_its_chunk_to_the_top(
    kbs: dict[str, KnowledgeBase],
) -> None:
    offline = [r.document_id for r in kbs["offline"].query(QUERY, top_n=4)]
    assert offline[0] != "harbour"  # the case: offline ranks another chunk first
    assert kbs["oracle"].query(QUERY, top_n=4)[0].document_id == "harbour"


def test_questions_about_something_else_leave_the_ranking_as_offline(
    kbs: dict[str, KnowledgeBase],
) -> None:
    rows = kbs["off-topic"].store.scroll_vectors(
        "default", {"record": "match", "match_kind": "question"}, fields=("matched_text",)
    )
    assert rows == []  # none is about its chunk: not stored
    for query in (QUERY, "Which bread is sold on Mill Street?", "gallery admission"):
        offline = kbs["offline"].query(query, top_n=4)
        off_topic = kbs["off-topic"].query(query, top_n=4)
        assert [(r.document_id, r.score) for r in off_topic] == [
            (r.document_id, r.score) for r in offline
        ]
