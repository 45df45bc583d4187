"""Context expansion (``expand``): a short result, or several results of one section, shown
with its section or its neighbouring chunks, within a token budget, through the Python API
(sync and async), the agent tool and the MCP server. The rules (which result is expanded,
the budget, merging, access) are the engine's, so most are tested on ``expanded`` with
results picked by hand; the HTTP API, the ``Client`` and the CLI are in
tests/test_expand_served.py."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexmatch import (
    Access,
    ConfigError,
    Document,
    Element,
    KnowledgeBase,
    Principal,
    QueryError,
    SearchResult,
    answer_result,
)
from flexmatch.adapters.agent import handle_tool_call
from flexmatch.adapters.mcp import build_server
from flexmatch.engine.reading import expanded
from flexmatch.models import ChunkView, DocumentDetail
from flexmatch.testing import memory_knowledge_base
from flexmatch.text import count_tokens
from tests.conftest import write_config

ALICE = Principal(user="alice")


def _sentences(topic: str, count: int) -> str:
    return " ".join(
        f"The {topic} rule number {i} says boats of class {i} pay {i + 3} euros on day {i}."
        for i in range(count)
    )


def guide() -> Document:
    """A short section (its own chunk, too short to stand alone) whose answer is in the
    next chunk, a long section of several chunks, and a last section."""
    return Document(
        id="guide",
        uri="/docs/guide.md",
        source="default",
        title="Harbour guide",
        elements=[
            Element(kind="heading", level=1, text="Opening hours", page=1),
            Element(kind="paragraph", text="The office hours follow.", page=1),
            Element(kind="heading", level=2, text="Summer", page=2),
            Element(
                kind="paragraph",
                text="In summer the office opens at dawn and closes at nine in the evening. "
                + _sentences("summer", 4),
                page=2,
            ),
            Element(kind="heading", level=1, text="Fees", page=3),
            *(
                Element(kind="paragraph", text=_sentences(f"fee{p}", 6), page=3 + p)
                for p in range(4)
            ),
            Element(kind="heading", level=1, text="Safety", page=7),
            Element(kind="paragraph", text=_sentences("safety", 5), page=7),
        ],
    )


def secret() -> Document:
    """Bob's: the same headings as the guide's, text no one else may read."""
    return Document(
        id="secret",
        uri="/docs/secret.md",
        source="default",
        title="Secret",
        elements=[
            Element(kind="heading", level=1, text="Opening hours"),
            Element(kind="paragraph", text="The vault opens at midnight."),
            Element(kind="heading", level=2, text="Summer"),
            Element(kind="paragraph", text="Vault code " + _sentences("vault", 3)),
        ],
    )


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    with memory_knowledge_base(tmp_path / "kb") as kb:
        assert not kb.ingest_documents([guide(), secret()]).failed
        kb.set_access("secret", Access(principals=["user:bob"]))
        yield kb


def chunks(kb: KnowledgeBase, document_id: str = "guide") -> list[ChunkView]:
    return kb.get_document(document_id).chunks


def hit(kb: KnowledgeBase, index: int, document_id: str = "guide") -> SearchResult:
    """The result a search would give for chunk ``index``."""
    detail = kb.get_document(document_id)
    chunk = next(c for c in detail.chunks if c.index == index)
    return SearchResult(
        chunk_id=chunk.id,
        document_id=document_id,
        uri=detail.document.uri,
        source="default",
        title=detail.document.title,
        heading_path=chunk.heading_path,
        content=chunk.content,
        qualifying_text="",
        matched_text=chunk.content[:40],
        score=1.0,
        chunk_index=chunk.index,
        location=chunk.location,
    )


def expand_by_hand(
    kb: KnowledgeBase, results: list[SearchResult], mode: str, budget: int = 1000, least: int = 60
) -> list[SearchResult]:
    def detail(document_id: str) -> DocumentDetail:
        return kb.get_document(document_id)

    return expanded(detail, results, mode, budget, least)  # type: ignore[arg-type]


def index_of(kb: KnowledgeBase, heading: str) -> list[int]:
    return [c.index for c in chunks(kb) if c.heading_path and c.heading_path[-1] == heading]


# -- the rules ------------------------------------------------------------------------------
def test_the_guide_has_the_shapes_the_tests_need(kb: KnowledgeBase) -> None:
    (opening,) = index_of(kb, "Opening hours")
    assert count_tokens(chunks(kb)[opening].content) < 60  # too short to stand alone
    assert len(index_of(kb, "Fees")) >= 2  # a section of several chunks


def test_a_short_chunk_gets_its_neighbours_with_the_answer(kb: KnowledgeBase) -> None:
    (opening,) = index_of(kb, "Opening hours")
    (result,) = expand_by_hand(kb, [hit(kb, opening)], "neighbours")
    context = result.context
    assert context is not None and context.kind == "neighbours"
    assert "opens at dawn" in context.text  # the answer, in the next chunk
    assert context.text.startswith("The office hours follow.")  # the hit's own chunk first
    assert (context.chunk_start, context.chunk_end) == (opening, opening + 1)
    assert context.tokens == count_tokens(context.text)
    # the hit is still cited where it is; the expanded range is named apart
    assert result.cite == "guide.md p. 1" and context.cite == "guide.md pp. 1-2"


def test_a_long_lone_chunk_is_left_as_it_is(kb: KnowledgeBase) -> None:
    (safety,) = index_of(kb, "Safety")
    (result,) = expand_by_hand(kb, [hit(kb, safety)], "section")
    assert result.context is None


def test_results_of_one_section_are_merged_without_repeating_text(kb: KnowledgeBase) -> None:
    first, second = index_of(kb, "Fees")[:2]
    (safety,) = index_of(kb, "Safety")
    results = [hit(kb, second), hit(kb, safety), hit(kb, first)]
    top, lone, merged = expand_by_hand(kb, results, "section")
    assert top.context is not None and top.context.kind == "section"
    assert top.context.section == "Fees"
    fees = index_of(kb, "Fees")
    assert (top.context.chunk_start, top.context.chunk_end) == (fees[0], fees[-1])
    assert lone.context is None
    assert merged.context is not None and merged.context.shown_in == 1
    assert merged.context.text == "" and merged.context.tokens == 0
    # the chunker's overlap is kept once: each sentence of the section appears once
    for sentence in re.findall(r"The fee\d rule number \d+[^.]*\.", top.context.text):
        assert top.context.text.count(sentence) == 1, sentence
    # in the facts block too: the merged result's text is not shown again
    kb_text = asyncio.run(_markdown(kb, [top, lone, merged]))
    assert "(this passage is in fact 1's expanded text above)" in kb_text
    last_sentence = _sentences("fee3", 6).rsplit(". ", 1)[-1]
    assert kb_text.count(last_sentence) == 1


async def _markdown(kb: KnowledgeBase, results: list[SearchResult]) -> str:
    return await kb.aformat("fees", results, "markdown")


def test_the_budget_bounds_every_context_together(kb: KnowledgeBase) -> None:
    fees = index_of(kb, "Fees")
    results = [hit(kb, fees[0]), hit(kb, fees[-1])]
    whole = expand_by_hand(kb, results, "section", budget=10_000)
    assert whole[0].context is not None and whole[0].context.tokens > 300
    for budget in (50, 300, whole[0].context.tokens - 1):
        cut = expand_by_hand(kb, results, "section", budget=budget)
        assert sum(r.context.tokens for r in cut if r.context) <= budget
    # a budget that holds no chunk beside the hit: the bare chunk
    bare = expand_by_hand(kb, results, "section", budget=20)
    assert all(r.context is None for r in bare)


def test_the_formatted_output_stays_within_the_budget(kb: KnowledgeBase) -> None:
    """The facts block grows by at most the budget (and one line a result naming the
    expanded range) over today's: the context is shown instead of the bare chunk. The
    JSON result keeps each result's own ``content`` beside its context (what the client
    reads back), so it grows by the contexts and the chunks they hold."""
    config = kb.config.query
    for budget in (80, 200, 600):
        kb.use_query_config(config.model_copy(update={"expand_budget_tokens": budget}))
        for mode in ("section", "neighbours"):
            plain = kb.search("office opening hours fees", top_n=5, expand="none")
            wide = kb.search("office opening hours fees", top_n=5, expand=mode)  # type: ignore[arg-type]
            expanded_ = [r for r in wide.results if r.context and r.context.text]
            assert sum(r.context.tokens for r in expanded_ if r.context) <= budget
            contexts = sum(1 for r in wide.results if r.context)
            lines = 20 * contexts
            before = count_tokens(kb.format_answer(plain, "markdown"))
            after = count_tokens(kb.format_answer(wide, "markdown"))
            assert after - before <= budget + lines, (budget, mode)
            own = sum(count_tokens(r.content) for r in expanded_)
            before = count_tokens(kb.format_answer(plain, "json"))
            after = count_tokens(kb.format_answer(wide, "json"))
            fields = 60 * contexts  # its keys, and the escapes of its text's line breaks
            assert after - before <= budget + own + fields, (budget, mode)


def test_a_chunk_written_again_since_the_search_is_not_expanded(kb: KnowledgeBase) -> None:
    (opening,) = index_of(kb, "Opening hours")
    stale = hit(kb, opening).model_copy(update={"chunk_id": "guide#old"})
    (result,) = expand_by_hand(kb, [stale], "neighbours")
    assert result.context is None


# -- through the Python API -------------------------------------------------------------------
QUERY = "when does the office open"


def test_none_and_the_default_are_todays_output(kb: KnowledgeBase) -> None:
    default = kb.search(QUERY, top_n=5)
    none = kb.search(QUERY, top_n=5, expand="none").model_copy(update={"took_ms": 0})
    assert all(r.context is None for r in default.results)
    for chain in ("markdown", "json"):
        today = kb.format_answer(default.model_copy(update={"took_ms": 0}), chain)
        assert kb.format_answer(none, chain) == today  # the same bytes
        assert '"context"' not in today and "expanded:" not in today
    assert "context" not in answer_result(default).model_dump(exclude_none=True)["results"][0]


def test_the_config_sets_the_default_mode(tmp_path: Path) -> None:
    write_config(tmp_path / "kb", "query:\n  expand: neighbours\n  expand_min_tokens: 30\n")
    with memory_knowledge_base(tmp_path / "kb") as kb:
        kb.ingest_documents([guide()])
        found = kb.search("office hours follow", top_n=1)
        assert found.results[0].context is not None
        assert kb.search("office hours follow", top_n=1, expand="none").results[0].context is None


def shown(results: list[SearchResult]) -> list[tuple[str, object]]:
    return [(r.chunk_id, r.context) for r in results]


def test_sync_and_async_expand_alike(kb: KnowledgeBase) -> None:
    for mode in ("none", "section", "neighbours"):
        sync = kb.search(QUERY, top_n=5, expand=mode)  # type: ignore[arg-type]
        asynchronous = asyncio.run(kb.asearch(QUERY, top_n=5, expand=mode))  # type: ignore[arg-type]
        # (the store's scores may differ in their last bits from one search to the next)
        assert shown(sync.results) == shown(asynchronous.results)
        assert shown(kb.query(QUERY, top_n=5, expand=mode)) == shown(sync.results)  # type: ignore[arg-type]
        assert shown(asyncio.run(kb.aquery(QUERY, top_n=5, expand=mode))) == shown(sync.results)  # type: ignore[arg-type]
        if mode != "none":
            assert any(r.context is not None for r in sync.results), mode


def test_a_bad_expand_is_a_clear_error(tmp_path: Path, kb: KnowledgeBase) -> None:
    with pytest.raises(QueryError) as refused:
        kb.search(QUERY, expand="neighbors")  # type: ignore[arg-type]
    assert refused.value.code == "invalid_expand"
    assert str(refused.value) == (
        "expand must be one of none, section, neighbours, not 'neighbors'"
    )
    write_config(tmp_path / "bad", "query:\n  expand: everything\n")
    with pytest.raises(ConfigError, match="expand"):
        memory_knowledge_base(tmp_path / "bad")


def test_expansion_never_reads_a_document_the_searcher_may_not_read(kb: KnowledgeBase) -> None:
    """Bob's document shares the guide's headings: Alice's expanded results never hold its
    text, and a result of it handed to the expansion (as if the search had let it through)
    is left bare."""
    for mode in ("section", "neighbours"):
        answer = kb.search("opening hours summer code", top_n=10, expand=mode, principal=ALICE)  # type: ignore[arg-type]
        assert answer.results and {r.document_id for r in answer.results} == {"guide"}
        shown = kb.format_answer(answer, "json") + kb.format_answer(answer, "markdown")
        assert "vault" not in shown.lower()
    forged = [hit(kb, 0, "secret"), hit(kb, 1, "secret")]
    reader = kb._reader  # the expansion every search uses
    for mode in ("section", "neighbours"):
        alice = reader.expand("default", ALICE, forged, mode, 1000, 60)  # type: ignore[arg-type]
        assert [r.context for r in alice] == [None, None]
        bob = reader.expand("default", Principal(user="bob"), forged, mode, 1000, 60)  # type: ignore[arg-type]
        assert bob[0].context is not None and "Vault code" in bob[0].context.text


def test_expansion_stays_in_the_tenant(tmp_path: Path) -> None:
    with memory_knowledge_base(tmp_path / "kb") as kb:
        kb.ingest_documents([guide()], tenant="a")
        other = secret().model_copy(update={"id": "guide"})
        kb.ingest_documents([other], tenant="b")
        (opening,) = [c.index for c in kb.get_document("guide", tenant="a").chunks][:1]
        found = kb.search("office hours follow", top_n=3, expand="neighbours", tenant="a")
        texts = " ".join(r.context.text for r in found.results if r.context)
        assert "opens at dawn" in texts and "vault" not in texts.lower()
        assert opening == 0


# -- the agent tool and MCP -------------------------------------------------------------------
def agent_search(kb: KnowledgeBase, arguments: dict[str, object]) -> dict[str, object]:
    raw = handle_tool_call(kb, "search_knowledge", arguments)
    return json.loads(asyncio.run(raw))  # type: ignore[no-any-return]


def python_json(kb: KnowledgeBase, mode: str) -> dict[str, object]:
    answer = kb.search(QUERY, top_n=5, expand=mode)  # type: ignore[arg-type]
    return json.loads(kb.format_answer(answer, "json"))  # type: ignore[no-any-return]


@pytest.fixture
def public_kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    with memory_knowledge_base(tmp_path / "public") as kb:
        assert not kb.ingest_documents([guide()]).failed
        yield kb


def test_the_agent_tool_expands_as_python_does(public_kb: KnowledgeBase) -> None:
    for mode in ("none", "section", "neighbours"):
        said = agent_search(public_kb, {"query": QUERY, "top_n": 5, "expand": mode})
        assert said == python_json(public_kb, mode), mode
    plain = agent_search(public_kb, {"query": QUERY, "top_n": 5})
    assert plain == python_json(public_kb, "none")
    refused = agent_search(public_kb, {"query": QUERY, "expand": "all"})
    assert "error" in refused and "expand" in str(refused["error"])


def test_the_mcp_search_tool_expands_as_python_does(public_kb: KnowledgeBase) -> None:
    from mcp import Client as McpClient

    async def call(arguments: dict[str, object]) -> tuple[bool, str]:
        async with McpClient(build_server(public_kb)) as client:
            result = await client.call_tool("search_knowledge", arguments)
        return result.is_error, result.content[0].text  # type: ignore[union-attr]

    for mode in ("section", "neighbours"):
        error, text = asyncio.run(call({"query": QUERY, "top_n": 5, "expand": mode}))
        assert not error and json.loads(text) == python_json(public_kb, mode), mode
        assert any("context" in r for r in json.loads(text)["results"])
    error, text = asyncio.run(call({"query": QUERY, "top_n": 5}))
    assert not error and json.loads(text) == python_json(public_kb, "none")
    error, text = asyncio.run(call({"query": QUERY, "expand": "all"}))
    assert error and "expand" in text
