"""Deep search (``depth="deep"``) through the Python API: the first results seed follow-up
searches whose results are fused into one list, each result's hop in its explanation and
the cost in the answer; every hop is the one access-scoped search, bounded by
``query.deep``; ``fast``, the default, ranks as it always did. The other interfaces are
tests/adapters/test_deep_surfaces.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexmatch import (
    Access,
    DepthError,
    Document,
    Element,
    KnowledgeBase,
    Principal,
    answer_result,
)
from flexmatch.testing import FakeLLMServer, memory_knowledge_base
from tests.conftest import llm_config, write_config

QUESTION = "Who founded the record label that released the album Blue Train?"
BRIDGE = "blue-note"  # the passage the question never names
LABELS = [
    ("Sun Records", "Sam Phillips"),
    ("Stax Records", "Jim Stewart"),
    ("Motown", "Berry Gordy"),
    ("Chess Records", "Leonard Chess"),
    ("Atlantic Records", "Ahmet Ertegun"),
    ("Verve Records", "Norman Granz"),
    ("Riverside Records", "Orrin Keepnews"),
    ("Prestige Records", "Bob Weinstock"),
]
ALICE = Principal(user="alice")


def passage(document_id: str, title: str, text: str) -> Document:
    return Document(
        id=document_id,
        uri=f"/{document_id}.txt",
        source="default",
        title=title,
        elements=[Element(kind="paragraph", text=text)],
    )


def bridge_corpus() -> list[Document]:
    """A bridge question: the album's passage names the label, whose passage the question
    never names, among labels whose passages echo the question's words."""
    documents = [
        passage(
            "blue-train",
            "Blue Train",
            "Blue Train is a studio album by the saxophonist John Coltrane, recorded in 1957 "
            "and released by Blue Note Records.",
        ),
        passage(
            BRIDGE,
            "Blue Note Records",
            "Blue Note Records is an American jazz label established in 1939 by Alfred Lion "
            "and Max Margulis in New York.",
        ),
    ]
    for label, who in LABELS:
        slug = label.lower().replace(" ", "-")
        text = (
            f"{label} is a record label that was founded by {who}. The label released many "
            "an album; who founded it is a common question about the record label."
        )
        documents.append(passage(slug, label, text))
    return documents


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    with memory_knowledge_base(tmp_path / "kb") as kb:
        assert not kb.ingest_documents(bridge_corpus()).failed
        yield kb


def ids(results: list) -> list[str]:  # type: ignore[type-arg]
    return [r.document_id for r in results]


def test_deep_finds_the_passage_the_question_never_names(kb: KnowledgeBase) -> None:
    fast = kb.search(QUESTION, top_n=5)
    assert BRIDGE not in ids(fast.results) and fast.cost is None
    deep = kb.search(QUESTION, top_n=5, depth="deep")
    assert ids(deep.results)[0] == "blue-train"  # the strong first result stays on top
    assert BRIDGE in ids(deep.results)
    bridge = next(r for r in deep.results if r.document_id == BRIDGE)
    assert (
        bridge.signals.hop == 2
        and bridge.signals.found_by == "Blue Note Records founded record label"
    )
    assert deep.results[0].signals.hop == 1 and deep.results[0].signals.found_by is None
    scores = [r.score for r in deep.results]
    assert scores == sorted(scores, reverse=True)
    cost = deep.cost
    assert cost is not None and cost.hops == 2 and cost.searches == 1 + len(cost.follow_ups)
    assert "Blue Note Records founded record label" in cost.follow_ups and cost.llm_calls == 0
    assert cost.took_ms > 0 and cost.stopped is None
    # explain shows the hop; the tool result carries the cost, a fast one none
    shown = answer_result(deep, explain=True)
    assert {r.explanation.hop for r in shown.results if r.explanation} == {1, 2}
    assert '"cost"' in shown.to_json() and '"cost"' not in answer_result(fast).to_json()


def test_async_twins_and_query_take_the_depth(kb: KnowledgeBase) -> None:
    async def both() -> tuple[list[str], list[str]]:
        answer = await kb.asearch(QUESTION, top_n=5, depth="deep")
        results = await kb.aquery(QUESTION, top_n=5, depth="deep")
        return ids(answer.results), ids(results)

    searched, queried = asyncio.run(both())
    assert searched == queried == ids(kb.query(QUESTION, top_n=5, depth="deep"))
    assert BRIDGE in searched


def test_fast_is_the_default_and_ranks_as_before(kb: KnowledgeBase) -> None:
    default = kb.search(QUESTION, top_n=5)
    fast = kb.search(QUESTION, top_n=5, depth="fast")
    assert [(r.chunk_id, r.score, r.signals) for r in default.results] == [
        (r.chunk_id, r.score, r.signals) for r in fast.results
    ]
    assert all(r.signals.hop is None for r in default.results) and default.cost is None


def test_a_bad_depth_is_a_named_error(kb: KnowledgeBase) -> None:
    with pytest.raises(DepthError, match="depth must be 'fast' or 'deep', not 'deeper'"):
        kb.search(QUESTION, depth="deeper")  # type: ignore[arg-type]
    assert DepthError.code == "invalid_depth" and DepthError.status == 422


def test_no_hop_reads_or_is_seeded_by_what_the_principal_may_not_read(
    kb: KnowledgeBase,
) -> None:
    # the album's passage, the one that names the label, is hidden from alice: no hop
    # shows it to her, and no follow-up is written from it
    kb.set_access("blue-train", Access(principals=["user:bob"]))
    admin = kb.search(QUESTION, top_n=5, depth="deep")
    assert (
        admin.cost is not None and "Blue Note Records founded record label" in admin.cost.follow_ups
    )
    hers = kb.search(QUESTION, top_n=10, depth="deep", principal=ALICE)
    assert hers.cost is not None and hers.cost.follow_ups
    assert "blue-train" not in ids(hers.results)
    assert not any("Blue Note" in q or "Coltrane" in q for q in hers.cost.follow_ups)
    # a hidden passage is never found by a follow-up either
    kb.set_access(BRIDGE, Access(principals=["user:bob"]))
    again = kb.search("Blue Note Records", top_n=10, depth="deep", principal=ALICE)
    assert BRIDGE not in ids(again.results)
    # and another tenant's search finds nothing from any hop
    assert kb.search(QUESTION, depth="deep", tenant="someone-else").results == []


def deep_settings(kb_dir: Path, settings: str, extra: str = "") -> None:
    write_config(kb_dir, extra + f"query:\n  deep:\n{settings}")


def test_bounds_hops_searches_and_time(tmp_path: Path) -> None:
    deep_settings(tmp_path / "a", "    max_searches: 3\n    max_hops: 5\n")
    with memory_knowledge_base(tmp_path / "a") as kb:
        kb.ingest_documents(bridge_corpus())
        cost = kb.search(QUESTION, depth="deep").cost
        assert cost is not None and cost.searches == 3 and cost.stopped == "max_searches"
    deep_settings(tmp_path / "b", "    max_hops: 1\n")
    with memory_knowledge_base(tmp_path / "b") as kb:
        kb.ingest_documents(bridge_corpus())
        cost = kb.search(QUESTION, depth="deep").cost
        assert cost is not None and (cost.hops, cost.searches, cost.follow_ups) == (1, 1, [])
    deep_settings(tmp_path / "c", "    max_hops: 3\n    max_searches: 20\n")
    with memory_knowledge_base(tmp_path / "c") as kb:
        kb.ingest_documents(bridge_corpus())
        cost = kb.search(QUESTION, depth="deep").cost
        assert cost is not None and cost.hops <= 3 and cost.searches <= 20
    deep_settings(tmp_path / "d", "    time_budget: 0.000001\n")
    with memory_knowledge_base(tmp_path / "d") as kb:
        kb.ingest_documents(bridge_corpus())
        answer = kb.search(QUESTION, top_n=5, depth="deep")
        cost = answer.cost
        assert cost is not None and cost.stopped == "time_budget" and cost.hops == 1
        assert ids(answer.results) == ids(kb.search(QUESTION, top_n=5).results)


def test_the_llm_writes_the_follow_ups_and_they_are_counted(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    # the query transform as typed, so only the follow-ups call the LLM
    offline_ingest = "sources:\n  default: {matching_text: sentences, qualifying_text: headings}\n"
    query = "query:\n  query_transform: identity\n  deep: {max_hops: 2, time_budget: 60}\n"
    write_config(tmp_path / "kb", llm_config(llm_server) + offline_ingest + query)
    with memory_knowledge_base(tmp_path / "kb") as kb:
        kb.ingest_documents(bridge_corpus())
        before = len(llm_server.requests_to("/chat/completions"))
        answer = kb.search(QUESTION, top_n=5, depth="deep")
        asked = [json.dumps(r.body) for r in llm_server.requests_to("/chat/completions")]
        prompts = [p for p in asked[before:] if "<results>" in p]
        assert len(prompts) == 1 and "Blue Train" in prompts[0]
        cost = answer.cost
        assert cost is not None and cost.llm_calls == 1 and cost.llm_tokens > 0
        assert "Blue Note Records" in cost.follow_ups and BRIDGE in ids(answer.results)


def test_rarity_is_counted_in_the_knowledge_base_as_the_caller_may_read_it(
    kb: KnowledgeBase,
) -> None:
    from flexmatch.engine.query.deep import store_rarity

    rarity = store_rarity(kb.store, "default", {})
    rare = asyncio.run(rarity(["label", "coltrane", "zyzzyva", "the"]))
    assert rare["zyzzyva"] == 1.0 and rare["the"] == 0.0  # in no passage; a stopword
    assert rare["coltrane"] > rare["label"] > 0.0  # in one passage; in nine
    # a passage the caller may not read is not counted: Coltrane is in none she may read
    kb.set_access("blue-train", Access(principals=["user:bob"]))
    from flexmatch.access import access_filter

    hers = store_rarity(kb.store, "default", access_filter(ALICE))
    assert asyncio.run(hers(["coltrane"]))["coltrane"] == 1.0
    assert asyncio.run(rarity(["coltrane"]))["coltrane"] == rare["coltrane"]


def test_rarity_leaves_out_a_version_being_written(kb: KnowledgeBase) -> None:
    """A version in flight may carry other access rules: its passages are not counted,
    while the committed ones still are (rarity reads payloads only in that case)."""
    from flexmatch.engine.documents import DocumentRegistry
    from flexmatch.engine.query.deep import store_rarity
    from flexmatch.engine.stores import StoredPoint

    rarity = store_rarity(kb.store, "default", {})
    before = asyncio.run(rarity(["coltrane", "quokka"]))
    assert before["quokka"] == 1.0
    registry = DocumentRegistry(kb.store)
    record = next(r for r in registry.list("default") if r.id == "blue-train")
    registry.begin("default", record, "v-next")  # a write of blue-train begins
    (carrier,) = [
        h.payload
        for h in kb.store.scroll("default", {"record": "match", "document_id": "blue-train"})
        if h.payload.get("match_kind") == "content"
    ]
    kb.store.upsert(
        "default",
        [
            StoredPoint(
                id=f"00000000-0000-0000-0000-{n:012d}",
                vector=[0.1] * kb.runtime.embedder.dimension,
                text="The quokka recorded Blue Train.",
                payload={**carrier, "version": "v-next"},
            )
            for n in range(3)
        ],
    )
    during = asyncio.run(rarity(["coltrane", "quokka"]))
    assert during == before  # the new version's passages are not counted yet
