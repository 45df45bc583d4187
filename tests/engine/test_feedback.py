"""Feedback in the engine: a helpful mark makes its query a learned matching text of the
chunk (merged, capped, carried while the chunk's text is unchanged, removable), an
unhelpful one demotes the chunk for that query, within bounds; only a principal who may
read a chunk marks it, never across tenants, and at most ``per_minute`` a minute."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flexmatch import (
    Access,
    DocumentNotFoundError,
    FeedbackEvent,
    FeedbackRateError,
    KnowledgeBase,
    Principal,
    WriteConflictError,
)
from flexmatch.testing import memory_knowledge_base

TOWER = "# Alpha\n\nThe capital of France is Paris. It has the Eiffel tower.\n"
FRUIT = "# Beta\n\nBananas are yellow fruit rich in potassium.\n"
QUERY = "wrought iron landmark height"  # no word of any document


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tower.md").write_text(TOWER)
    (docs / "fruit.md").write_text(FRUIT)
    for n in range(4):
        (docs / f"other{n}.md").write_text(f"# Other {n}\n\nNote {n} about topic {n * 13}.\n")
    with memory_knowledge_base(tmp_path) as opened:
        assert not opened.ingest([docs]).failed
        yield opened


def chunk_of(kb: KnowledgeBase, name: str, tenant: str = "default") -> str:
    record = next(r for r in kb.list_documents(tenant=tenant) if r.uri.endswith(name))
    return kb.get_document(record.id, tenant=tenant).chunks[0].id


def learned(kb: KnowledgeBase, chunk_id: str, tenant: str = "default") -> list[tuple[str, int]]:
    detail = kb.get_document(chunk_id.split("#")[0], tenant=tenant)
    return sorted(
        (m.text, m.learned.count)
        for c in detail.chunks
        for m in c.matching_texts
        if m.kind == "learned" and m.learned is not None
    )


def test_a_helpful_mark_is_a_learned_matching_text_that_finds_its_chunk(kb: KnowledgeBase) -> None:
    fruit = chunk_of(kb, "fruit.md")
    assert all(r.matched_text != QUERY for r in kb.query(QUERY))
    bob = Principal(user="bob")
    receipt = kb.add_feedback(QUERY, fruit, True, principal=bob)
    assert receipt.learned_id and not receipt.merged
    again = kb.add_feedback(f"  {QUERY} ", fruit)  # the same text: merged, no new point
    assert again.merged and again.learned_id == receipt.learned_id
    assert learned(kb, fruit) == [(QUERY, 2)]
    top = kb.query(QUERY, top_n=1)[0]
    assert (top.chunk_id, top.matched_text) == (fruit, QUERY)
    detail = kb.get_document(fruit.split("#")[0])
    (text,) = [m for m in detail.chunks[0].matching_texts if m.kind == "learned"]
    assert text.learned is not None
    assert [mark.who for mark in text.learned.marks] == ["user:bob", "admin"]


def test_learned_texts_are_capped_per_chunk(kb: KnowledgeBase) -> None:
    kb.config.feedback.max_learned_per_chunk = 2
    fruit = chunk_of(kb, "fruit.md")
    kb.add_feedback("first question", fruit)
    kb.add_feedback("first question", fruit)
    kb.add_feedback("second question", fruit)
    kb.add_feedback("third question", fruit)  # the least-marked, oldest gives way
    assert learned(kb, fruit) == [("first question", 2), ("third question", 1)]


def test_an_unhelpful_mark_demotes_the_chunk_for_that_query_only_and_boundedly(
    kb: KnowledgeBase,
) -> None:
    kb.config.feedback.demote_places = 1
    ranked = [r.chunk_id for r in kb.query(QUERY, top_n=5)]
    first = ranked[0]
    kb.add_feedback(QUERY, first, False)
    after = kb.query(QUERY, top_n=5)
    assert [r.chunk_id for r in after][:2] == [ranked[1], first]  # one place, no more
    assert after[1].signals.demoted == 1
    assert [r.score for r in after] == sorted((r.score for r in after), reverse=True)
    other = kb.query("bananas potassium yellow", top_n=5)  # a query far from it
    assert all(r.signals.demoted is None for r in other)


def test_only_a_reader_of_the_chunk_may_mark_it_and_never_across_tenants(
    kb: KnowledgeBase,
) -> None:
    fruit = chunk_of(kb, "fruit.md")
    kb.set_access(fruit.split("#")[0], Access(principals=["user:alice"]))
    bob, alice = Principal(user="bob"), Principal(user="alice")
    with pytest.raises(DocumentNotFoundError) as hidden:
        kb.add_feedback(QUERY, fruit, principal=bob)
    with pytest.raises(DocumentNotFoundError) as missing:
        kb.add_feedback(QUERY, "no-such-document#0", principal=bob)
    assert str(hidden.value).replace(fruit, "ID") == str(missing.value).replace(
        "no-such-document#0", "ID"
    )
    with pytest.raises(DocumentNotFoundError):
        kb.add_feedback(QUERY, fruit, False, principal=bob)
    with pytest.raises(DocumentNotFoundError):
        kb.add_feedback(QUERY, fruit, tenant="elsewhere")
    assert learned(kb, fruit) == []
    kb.add_feedback(QUERY, fruit, principal=alice)
    assert learned(kb, fruit) == [(QUERY, 1)]
    # the learned text has the chunk's access: bob does not find the chunk by it
    assert fruit not in {r.chunk_id for r in kb.query(QUERY, principal=bob)}
    assert kb.query(QUERY, top_n=1, principal=alice)[0].chunk_id == fruit


def test_feedback_is_rate_limited_per_principal(kb: KnowledgeBase) -> None:
    kb.config.feedback.per_minute = 2
    fruit = chunk_of(kb, "fruit.md")
    bob = Principal(user="bob")
    kb.add_feedback("one", fruit, principal=bob)
    kb.add_feedback("two", fruit, principal=bob)
    with pytest.raises(FeedbackRateError, match=r"user:bob gave 2 feedback marks"):
        kb.add_feedback("three", fruit, principal=bob)
    assert FeedbackRateError.status == 429
    kb.add_feedback("three", fruit, principal=Principal(user="carol"))  # her own minute
    assert [t for t, _ in learned(kb, fruit)] == ["one", "three", "two"]


def test_learned_texts_stay_while_the_chunk_text_does_and_go_when_it_changes(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    fruit = chunk_of(kb, "fruit.md")
    document_id = fruit.split("#")[0]
    kb.add_feedback(QUERY, fruit)
    kb.add_feedback("not this one", fruit, False)
    version = kb.get_document(document_id).document.version
    kb.update_metadata(document_id, {"team": "produce"})  # a new version, the same text
    assert kb.get_document(document_id).document.version != version
    assert learned(kb, fruit) == [(QUERY, 1)]
    assert kb.query(QUERY, top_n=1)[0].chunk_id == fruit
    assert kb.query("not this one", top_n=5)  # the demotion stays readable
    kb.ingest([tmp_path / "docs"])  # identical text: nothing rewritten, all kept
    assert learned(kb, fruit) == [(QUERY, 1)]
    (tmp_path / "docs" / "fruit.md").write_text(FRUIT.replace("potassium", "sugar"))
    kb.ingest([tmp_path / "docs"])
    assert learned(kb, fruit) == []
    assert kb.store.scroll("default", {"record": "feedback", "chunk_id": fruit}) == []


def test_a_learned_texts_words_find_its_chunk_by_bm25_while_it_is_kept(
    kb: KnowledgeBase,
) -> None:
    kb.config.query.retrieval = "lexical"  # BM25 alone: only words can find a chunk
    fruit = chunk_of(kb, "fruit.md")
    document_id = fruit.split("#")[0]
    asked = "zeppelin snack"  # no word of any document

    def found() -> list[str]:
        return [r.chunk_id for r in kb.query(asked, top_n=5)]

    assert fruit not in found()
    receipt = kb.add_feedback(asked, fruit)
    assert found()[0] == fruit
    kb.update_metadata(document_id, {"team": "produce"})  # carried to the new version
    assert found()[0] == fruit
    kept = next(
        m
        for c in kb.get_document(document_id).chunks
        for m in c.matching_texts
        if m.kind == "learned"
    )
    assert kept.learned is not None and receipt.learned_id
    kb.remove_learned(kept.learned.id)
    assert fruit not in found()


def test_an_admin_removes_a_learned_text_and_listeners_hear_each_mark(kb: KnowledgeBase) -> None:
    heard: list[FeedbackEvent] = []
    kb.on_feedback(heard.append)
    fruit = chunk_of(kb, "fruit.md")
    kept = kb.add_feedback(QUERY, fruit)
    kb.add_feedback("another question", fruit)
    assert [(e.query, e.chunk_id, e.helpful, e.principal) for e in heard] == [
        (QUERY, fruit, True, "admin"),
        ("another question", fruit, True, "admin"),
    ]
    assert kept.learned_id is not None
    kb.remove_learned(kept.learned_id)
    assert learned(kb, fruit) == [("another question", 1)]
    with pytest.raises(DocumentNotFoundError, match="no learned matching text"):
        kb.remove_learned(kept.learned_id)
    with pytest.raises(DocumentNotFoundError):
        kb.remove_learned(kept.learned_id, tenant="elsewhere")


def meanwhile(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, act: Callable[[], object]
) -> None:
    """Run ``act`` between the chunk's read and the mark's writes: another writer's turn."""
    keeper = kb._feedback
    learn = keeper._learn

    def late(*args: Any, **kwargs: Any) -> Any:
        act()
        return learn(*args, **kwargs)

    monkeypatch.setattr(keeper, "_learn", late)


def test_an_access_change_meanwhile_reaches_the_marks_points(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    fruit = chunk_of(kb, "fruit.md")
    document_id = fruit.split("#")[0]
    bob = Principal(user="bob")
    meanwhile(kb, monkeypatch, lambda: kb.set_access(document_id, Access(principals=["group:hr"])))
    kb.add_feedback(QUERY, fruit)
    assert all(r.document_id != document_id for r in kb.query(QUERY, principal=bob))
    assert kb.query(QUERY, top_n=1)[0].chunk_id == fruit  # the admin still finds it


def test_a_mark_given_while_its_document_goes_leaves_nothing(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    fruit = chunk_of(kb, "fruit.md")
    document_id = fruit.split("#")[0]
    meanwhile(kb, monkeypatch, lambda: kb.remove_document(document_id))
    with pytest.raises(WriteConflictError, match="give it again"):
        kb.add_feedback(QUERY, fruit)
    assert kb.store.scroll("default", {"chunk_id": fruit}) == []
    assert all(r.chunk_id != fruit for r in kb.query(QUERY))


def test_a_failing_listener_does_not_undo_a_kept_mark(kb: KnowledgeBase) -> None:
    def broken(_: FeedbackEvent) -> None:
        raise RuntimeError("the log's database is down")

    heard: list[FeedbackEvent] = []
    kb.on_feedback(broken)
    kb.on_feedback(heard.append)
    fruit = chunk_of(kb, "fruit.md")
    assert kb.add_feedback(QUERY, fruit).learned_id
    assert [e.query for e in heard] == [QUERY]
