"""The code chains: the ``code`` chunker (symbol paths, the budget, merging), the
``structure`` chunker on code, and the matching texts for code, offline and through the
fake LLM server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TypeVar

from flexmatch.chains import Chain, ChainContext, Chunker, MatchingTextChain, build_chain
from flexmatch.config import ChainRef
from flexmatch.engine.llm import LLM
from flexmatch.inputs.sources.files import discover, load
from flexmatch.models import Document, Section
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import MALFORMED_CONTENT
from flexmatch.text import count_tokens

K = TypeVar("K", bound=Chain)

SERVICE = '''"""A small web service."""
import json


class Server:
    """Serves the pages of a site."""

    def start(self, port: int = 8080) -> None:
        """Open the listening socket. Blocks until stopped."""
        self.port = port

    def stop(self) -> None:
        self.port = None


def parse_request(raw: bytes) -> dict:
    """Read an HTTP request into a dictionary of headers."""
    return json.loads(raw)
'''


def _chain(name: str, kind: type[K], context: ChainContext | None = None, **params: object) -> K:
    ref = ChainRef(chain=name, params=dict(params))
    return build_chain(ref, kind, context or ChainContext())


def _document(tmp_path: Path, name: str, source: str) -> Document:
    """A file read as a folder walk reads it (so it knows its path in the folder)."""
    path = tmp_path / "repo" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    tasks, _ = discover([tmp_path / "repo"], include=[name])
    (document,) = load(tasks[0], "default", 10**7)
    assert isinstance(document, Document)
    return document


def _sections(chunker: Chunker, document: Document) -> list[Section]:
    return asyncio.run(chunker.run(document))


def _long_function(statements: int) -> str:
    body = "\n".join(
        f"    total_{i} = compute(value, {i})\n    if total_{i} > limit:\n        log(total_{i})"
        for i in range(statements)
    )
    return f'def crunch(value, limit):\n    """Crunch numbers."""\n{body}\n    return value\n'


def test_code_chunker_heading_path_is_file_then_symbols(tmp_path: Path) -> None:
    document = _document(tmp_path, "web/service.py", SERVICE)
    sections = _sections(_chain("code", Chunker, merge_tokens=0), document)
    paths = [s.heading_path for s in sections]
    assert paths == [
        ["web/service.py"],
        ["web/service.py", "class Server"],
        ["web/service.py", "class Server", "def start"],
        ["web/service.py", "class Server", "def stop"],
        ["web/service.py", "def parse_request"],
    ]
    assert sections[2].text.startswith("def start(self, port: int = 8080) -> None:\n")


def test_code_chunker_merges_small_neighbours_under_their_shared_path(tmp_path: Path) -> None:
    document = _document(tmp_path, "service.py", SERVICE)
    sections = _sections(_chain("code", Chunker, merge_tokens=120), document)
    by_path = {tuple(s.heading_path): s.text for s in sections}
    # two methods of one class: one chunk under the class, naming both
    merged = by_path[("service.py", "class Server", "start, stop")]
    assert merged.startswith("def start") and "def stop" in merged
    # the module's code took the class's own code; a method never joins code outside its class
    assert [s.heading_path for s in sections] == [
        ["service.py", "class Server"],
        ["service.py", "class Server", "start, stop"],
        ["service.py", "def parse_request"],
    ]
    assert sections[0].text.endswith('class Server:\n    """Serves the pages of a site."""')
    assert all(count_tokens(s.text) <= 120 for s in sections)


def test_code_chunker_splits_a_long_definition_between_statements(tmp_path: Path) -> None:
    source = _long_function(40)
    document = _document(tmp_path, "crunch.py", source)
    sections = _sections(_chain("code", Chunker, max_tokens=120, merge_tokens=0), document)
    assert len(sections) > 3
    assert all(count_tokens(s.text) <= 120 for s in sections)
    assert all(s.heading_path == ["crunch.py", "def crunch"] for s in sections)
    assert sections[0].text.startswith("def crunch(value, limit):")
    for piece in sections[1:]:  # each piece starts a statement of the body, layout kept
        assert piece.text.startswith("    total_") or piece.text.startswith("    return")
        assert "\n        log(" in piece.text or piece.text.strip() == "return value"
    lines = [line for s in sections for line in s.text.split("\n")]
    assert lines == source.rstrip("\n").split("\n")  # nothing lost, nothing repeated


def test_structure_chunker_keeps_code_lines(tmp_path: Path) -> None:
    """A .py in a default source: chunks per definition, long ones cut at line breaks."""
    source = SERVICE + "\n\n" + _long_function(40)
    document = _document(tmp_path, "service.py", source)
    sections = _sections(_chain("structure", Chunker, max_tokens=120, overlap_tokens=20), document)
    assert ["service.py", "class Server", "def start"] in [s.heading_path for s in sections]
    crunch = [s for s in sections if s.heading_path == ["service.py", "def crunch"]]
    assert len(crunch) > 3 and all(count_tokens(s.text) <= 120 for s in crunch)
    assert all("\n    " in s.text for s in crunch)  # lines and indentation kept


def test_signatures_fallback_indexes_names_signatures_and_docstrings(tmp_path: Path) -> None:
    document = _document(tmp_path, "service.py", SERVICE)
    context = ChainContext()  # no LLM: the code-questions chain falls back
    matching = _chain("code-questions", MatchingTextChain, context)
    assert context.notices == [
        "no LLM configured: matching_text uses 'code-signatures' instead of 'code-questions'"
    ]
    section = Section(text=SERVICE.split("\n\n\n")[1], heading_path=["service.py", "class Server"])
    texts = [(m.kind, m.text) for m in asyncio.run(matching.run(section, document))]
    assert ("keyword", "server") in texts
    assert ("keyword", "server start") in texts
    assert ("sentence", "def start(self, port: int = 8080) -> None") in texts
    assert ("sentence", "start: Open the listening socket.") in texts
    assert ("sentence", "start: Blocks until stopped.") in texts
    assert ("sentence", "Server: Serves the pages of a site.") in texts
    assert texts[-1][0] == "content" and texts[-1][1].startswith("service.py › class Server\n")


def test_signatures_of_a_method_chunk_name_its_class(tmp_path: Path) -> None:
    document = _document(tmp_path, "service.py", SERVICE)
    sections = _sections(_chain("code", Chunker, merge_tokens=0), document)
    stop = next(s for s in sections if s.heading_path[-1] == "def stop")
    texts = asyncio.run(_chain("code-signatures", MatchingTextChain).run(stop, document))
    assert [(m.kind, m.text) for m in texts[:2]] == [
        ("keyword", "server stop"),
        ("sentence", "def stop(self) -> None"),
    ]


def test_signatures_in_other_languages(tmp_path: Path) -> None:
    source = (
        "// Package shop sells things.\npackage shop\n\n"
        "// AddItem puts an item into the cart and returns its new size.\n"
        "func (c *Cart) AddItem(item Item) int {\n\treturn len(c.items)\n}\n"
    )
    document = _document(tmp_path, "cart.go", source)
    section = next(
        s
        for s in _sections(_chain("code", Chunker, merge_tokens=0), document)
        if "AddItem" in s.text
    )
    texts = [
        m.text
        for m in asyncio.run(_chain("code-signatures", MatchingTextChain).run(section, document))
    ]
    assert "func (c *Cart) AddItem(item Item) int" in texts
    assert "c cart add item" in texts
    assert any(
        t.endswith(": AddItem puts an item into the cart and returns its new size.") for t in texts
    )


def _llm_context(server: FakeLLMServer) -> ChainContext:
    llm = LLM("openai/fake", api_base=server.base_url, api_key="k", retry_base_delay=0.01)
    return ChainContext(llm=llm)


def test_llm_code_questions_ask_about_every_chunk_in_one_call(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    document = _document(tmp_path, "service.py", SERVICE)
    sections = _sections(_chain("code", Chunker, merge_tokens=0), document)
    matching = _chain("code-questions", MatchingTextChain, _llm_context(llm_server))

    async def every() -> list[list[tuple[str, str]]]:
        answers = await asyncio.gather(*(matching.run(s, document) for s in sections[:4]))
        return [[(m.kind, m.text) for m in texts] for texts in answers]

    answers = asyncio.run(every())
    assert llm_server.successful_calls() == 1  # four chunks, one grouped call
    prompt = json.dumps(llm_server.requests_to("/chat/completions")[0].body)
    assert "questions that the piece answers" in prompt and "service.py (python)" in prompt
    start = answers[2]
    questions = [text for kind, text in start if kind == "question"]
    assert questions and all(q.startswith("What does the text say about") for q in questions)
    assert ("sentence", "def start(self, port: int = 8080) -> None") in start  # signatures too
    assert start[-1][0] == "content"


def test_an_unusable_answer_falls_back_to_signatures_for_that_chunk(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    document = _document(tmp_path, "service.py", SERVICE)
    stop = next(
        s
        for s in _sections(_chain("code", Chunker, merge_tokens=0), document)
        if s.heading_path[-1] == "def stop"
    )
    llm_server.responder = lambda messages: MALFORMED_CONTENT
    matching = _chain("code-questions", MatchingTextChain, _llm_context(llm_server))
    texts = asyncio.run(matching.run(stop, document))
    assert [m.kind for m in texts] == ["keyword", "sentence", "content"]
    assert texts[1].text == "def stop(self) -> None"


# -- a definition matched with its module's context ---------------------------------
TIDES = '''"""Tide tables for the harbour office.

Function high_water(port, day):
    Return the times of high water at a port on a day, from its tide table.

Function low_water(port, day):
    Return the times of low water.
"""

__all__ = ["high_water", "low_water"]

from harbour import tables
from harbour.tables import high_water_times, low_water_times


def high_water(port, day):
    table = tables.load(port)
    return high_water_times(table, day)


def low_water(port, day):
    table = tables.load(port)
    return low_water_times(table, day)
'''


def test_a_definition_is_matched_with_its_module_path_and_what_the_header_says_of_it(
    tmp_path: Path,
) -> None:
    """The header's words about ``high_water`` and the package ``harbour`` are in the
    function's matching texts, so the header does not outrank the function they
    describe; the header keeps its own texts."""
    document = _document(tmp_path, "harbour/tides.py", TIDES)
    sections = _sections(_chain("structure", Chunker), document)
    header, high = sections[0], next(s for s in sections if s.heading_path[-1] == "def high_water")
    sentences = _chain("sentences", MatchingTextChain)
    texts = [t.text for t in asyncio.run(sentences.run(high, document))]
    label = "harbour/tides.py › def high_water"
    assert (
        f"{label}: Function high_water(port, day): Return the times of high water at a port "
        "on a day, from its tide table."
    ) in texts
    content = texts[-1]
    assert content.startswith(f"{label}\nFunction high_water(port, day): Return the times")
    assert content.endswith(high.text)
    low = next(s for s in sections if s.heading_path[-1] == "def low_water")
    low_texts = [t.text for t in asyncio.run(sentences.run(low, document))]
    assert not any("high water at a port" in text for text in low_texts)
    header_texts = [t.text for t in asyncio.run(sentences.run(header, document))]
    assert header_texts[-1] == f"harbour/tides.py\n{header.text}"
