"""The query log through the Python API: what a search and a feedback event leave in
it (and what they do not: a key, a header), retention, tenant and access scoping, the
gaps grouped by meaning, the golden questions made from feedback, the counts, and the
log kept in a service's shared database."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from flexmatch import (
    Access,
    GoldenQuestion,
    KnowledgeBase,
    Principal,
    evaluate_golden,
    golden_yaml,
    load_config,
)
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.query.log import LOG_FILE
from flexmatch.service.state_db import SqlAlchemyDatabase
from tests.conftest import write_config
from tests.test_access import accesses, may_read, principals

ON = "query_log:\n  enabled: true\n  retention_days: 7\n"
FERRY = "# Ferry timetable\n\nThe ferry to the island leaves the harbour at nine every morning."
PAYROLL = "# Payroll\n\nSalaries are paid on the last Friday of each month by bank transfer."
ALICE = Principal(user="alice")
BOB = Principal(user="bob")


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[KnowledgeBase]:
    folder = tmp_path_factory.mktemp("querylog") / "kb"
    write_config(folder, ON)
    files = tmp_path_factory.mktemp("files")
    (files / "ferry.md").write_text(FERRY)
    (files / "payroll.md").write_text(PAYROLL)
    base = KnowledgeBase.open(folder, embedder=embedder, env={})
    for tenant in ("acme", "globex"):
        report = base.ingest([files], tenant=tenant)
        assert report.failed == [], report
    payroll = doc_id(base, "acme", "Payroll")
    base.set_access(payroll, Access(principals=["user:alice"]), tenant="acme")
    try:
        yield base
    finally:
        base.close()


@pytest.fixture(autouse=True)
def empty_log(kb: KnowledgeBase) -> Iterator[None]:
    yield
    kb.query_log.clock = time.time
    with kb.query_log.database.transaction() as db:
        db.execute("DELETE FROM query_log")
        db.execute("DELETE FROM query_feedback")


def doc_id(kb: KnowledgeBase, tenant: str, title: str) -> str:
    return next(r.id for r in kb.list_documents(tenant=tenant) if r.title == title)


def test_a_search_is_logged_with_its_results_and_who_asked_by_name(kb: KnowledgeBase) -> None:
    answer = kb.search("when does the ferry leave", tenant="acme", principal=BOB)
    [entry] = kb.query_log_entries(tenant="acme")
    assert entry.query == "when does the ferry leave"
    assert entry.principal == "user:bob" and entry.tenant == "acme"
    assert [r.chunk_id for r in entry.results] == [r.chunk_id for r in answer.results]
    assert [r.score for r in entry.results] == [r.score for r in answer.results]
    assert entry.results[0].document_id == doc_id(kb, "acme", "Ferry timetable")
    assert entry.good  # the ferry chunk is a close match
    kb.search("when does the ferry leave", tenant="acme")  # unscoped: the admin's view
    assert kb.query_log_entries(tenant="acme")[0].principal == "admin"


def test_nothing_is_logged_when_the_log_is_off_but_every_search_is_counted(
    kb: KnowledgeBase,
) -> None:
    before = (kb.query_log.counts.queries, kb.query_log.counts.nothing_good)
    kb.config = kb.config.model_copy(
        update={"query_log": kb.config.query_log.model_copy(update={"enabled": False})}
    )
    try:
        kb.search("when does the ferry leave", tenant="acme")
        kb.search("quantum chromodynamics on a lattice", tenant="acme")
        kb.query_log.record_feedback(
            "q", "c#0", True, document_id="d", tenant="acme", principal=None
        )
    finally:
        kb.config = load_config(kb.path)
    assert kb.query_log_entries(tenant="acme") == []
    assert kb.query_feedback(tenant="acme") == []
    after = (kb.query_log.counts.queries, kb.query_log.counts.nothing_good)
    assert (after[0] - before[0], after[1] - before[1]) == (2, 1)


def test_entries_older_than_the_retention_are_deleted(kb: KnowledgeBase) -> None:
    now = time.time()
    kb.query_log.clock = lambda: now - 8 * 86_400  # asked eight days ago: past the 7 kept
    kb.search("when does the ferry leave", tenant="acme")
    kb.query_log.record_feedback(
        "when does the ferry leave", "x#0", True, document_id="x", tenant="acme", principal=None
    )
    kb.query_log.clock = lambda: now - 6 * 86_400
    kb.search("who pays the salaries", tenant="acme")
    kb.query_log.clock = lambda: now
    assert [e.query for e in kb.query_log_entries(tenant="acme")] == ["who pays the salaries"]
    assert kb.query_feedback(tenant="acme") == []
    with sqlite3.connect(kb.path / ".flexmatch" / LOG_FILE) as db:  # gone, not just hidden
        assert db.execute("SELECT query FROM query_log").fetchall() == [("who pays the salaries",)]
        assert db.execute("SELECT COUNT(*) FROM query_feedback").fetchone() == (0,)


def test_a_tenant_never_sees_another_tenants_entries(kb: KnowledgeBase) -> None:
    kb.search("when does the ferry leave", tenant="globex")
    kb.query_log.record_feedback(
        "ferry", "c#0", False, document_id="d", tenant="globex", principal=None
    )
    assert kb.query_log_entries(tenant="acme") == []
    assert kb.query_feedback(tenant="acme") == []
    assert kb.gaps(tenant="acme") == []
    assert len(kb.query_log_entries(tenant="globex")) == 1


def test_a_reader_sees_only_results_and_feedback_on_documents_they_may_read(
    kb: KnowledgeBase,
) -> None:
    payroll = doc_id(kb, "acme", "Payroll")
    kb.search("when are salaries paid", tenant="acme", principal=ALICE)
    chunk = kb.query_log_entries(tenant="acme")[0].results[0]
    assert chunk.document_id == payroll
    kb.query_log.record_feedback(
        "when are salaries paid",
        chunk.chunk_id,
        False,
        document_id=payroll,
        tenant="acme",
        principal=ALICE,
    )
    assert payroll in {r.document_id for r in kb.query_log_entries(tenant="acme")[0].results}
    [seen] = kb.query_log_entries(tenant="acme", principal=BOB)
    assert payroll not in {r.document_id for r in seen.results}
    assert kb.query_feedback(tenant="acme", principal=BOB) == []
    assert len(kb.query_feedback(tenant="acme", principal=ALICE)) == 1
    # for bob the salary question found nothing he may read: a gap, never the document
    [gap] = kb.gaps(tenant="acme", principal=BOB)
    assert (gap.example, gap.unhelpful) == ("when are salaries paid", 0)
    assert payroll not in gap.model_dump_json()
    assert kb.golden_from_feedback(tenant="acme", principal=BOB) == []


def test_gaps_group_similar_queries_and_count_unhelpful_feedback(kb: KnowledgeBase) -> None:
    for text in (
        "recipe for chocolate cake",
        "recipe for chocolate cake",
        "how to bake a chocolate cake",
        "quantum chromodynamics on a lattice",
        "when does the ferry leave",  # found something good: no gap
    ):
        kb.search(text, tenant="acme")
    ferry = doc_id(kb, "acme", "Ferry timetable")
    for _ in range(3):
        kb.query_log.record_feedback(
            "ferry to the island",
            f"{ferry}#0",
            False,
            document_id=ferry,
            tenant="acme",
            principal=BOB,
        )
    found = kb.gaps(tenant="acme")
    assert [(g.count, g.example) for g in found] == [
        (3, "ferry to the island"),
        (3, "recipe for chocolate cake"),
        (1, "quantum chromodynamics on a lattice"),
    ]
    assert found[0].unhelpful == 3 and found[0].nothing_good == 0
    assert found[1].queries == ["recipe for chocolate cake", "how to bake a chocolate cake"]
    assert found[1].nothing_good == 3


def test_helpful_feedback_makes_golden_questions_in_the_eval_format(kb: KnowledgeBase) -> None:
    ferry, payroll = doc_id(kb, "acme", "Ferry timetable"), doc_id(kb, "acme", "Payroll")
    log = kb.query_log
    log.record_feedback(
        "ferry times", f"{ferry}#0", True, document_id=ferry, tenant="acme", principal=BOB
    )
    log.record_feedback(
        "ferry times", f"{payroll}#0", False, document_id=payroll, tenant="acme", principal=BOB
    )
    log.record_feedback(
        "pay day", f"{payroll}#0", True, document_id=payroll, tenant="acme", principal=ALICE
    )
    log.record_feedback(
        "nothing helped", f"{ferry}#0", False, document_id=ferry, tenant="acme", principal=BOB
    )
    [event] = [e for e in kb.query_feedback(tenant="acme") if e.query == "pay day"]
    assert (event.principal, event.chunk_id, event.helpful) == ("user:alice", f"{payroll}#0", True)
    items = yaml.safe_load(golden_yaml(kb.golden_from_feedback(tenant="acme")))
    assert items == [
        {"question": "ferry times", "expect": {"document": ferry}, "must_not": [payroll]},
        {"question": "pay day", "expect": {"document": payroll}},
    ]
    bob = yaml.safe_load(golden_yaml(kb.golden_from_feedback(tenant="acme", principal=BOB)))
    assert bob == [{"question": "ferry times", "expect": {"document": ferry}}]


def test_a_service_with_a_shared_database_keeps_the_log_there(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    shared = SqlAlchemyDatabase(f"sqlite:///{tmp_path / 'state.db'}")
    own = kb.query_log.database
    kb.query_log.share(shared)
    try:
        kb.search("when does the ferry leave", tenant="acme")
        assert [e.query for e in kb.query_log_entries(tenant="acme")] == [
            "when does the ferry leave"
        ]
        with shared.transaction() as db:
            assert db.execute("SELECT COUNT(*) FROM query_log").rows == [(1,)]
            db.execute("DELETE FROM query_log")
    finally:
        kb.query_log.share(own)
        shared.close()
    assert kb.query_log_entries(tenant="acme") == []


def test_an_eval_run_paused_leaves_no_trace_in_the_log(kb: KnowledgeBase) -> None:
    before = kb.query_log.counts.queries
    with kb.query_log.paused():
        kb.search("a golden question", tenant="acme")
        kb.run_sync(kb.asearch("another golden question", tenant="acme"))
    assert kb.query_log_entries(tenant="acme") == []
    assert kb.query_log.counts.queries == before


def test_feedback_given_through_the_knowledge_base_is_logged_and_counted(
    kb: KnowledgeBase,
) -> None:
    ferry = doc_id(kb, "acme", "Ferry timetable")
    chunk = kb.search("when does the ferry leave", tenant="acme").results[0].chunk_id
    before = kb.query_log.counts.unhelpful
    kb.add_feedback("ferry at dawn", chunk, False, tenant="acme", principal=BOB)
    [event] = kb.query_feedback(tenant="acme")
    assert (event.query, event.chunk_id, event.document_id) == ("ferry at dawn", chunk, ferry)
    assert (event.helpful, event.principal) == (False, "user:bob")
    assert kb.query_log.counts.unhelpful == before + 1
    assert kb.query_feedback(tenant="globex") == []


def test_golden_questions_judged_leave_no_trace_in_the_log(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    ferry = doc_id(kb, "acme", "Ferry timetable")
    questions = [
        GoldenQuestion.model_validate(
            {"question": "when does the ferry leave", "expect": {"document": ferry}}
        )
    ]
    before = kb.query_log.counts.queries
    judged = kb.run_sync(evaluate_golden(kb, questions, tmp_path, tenant="acme"))
    assert judged.runs[0].outcomes[0].passed
    assert kb.query_log_entries(tenant="acme") == []
    assert kb.query_log.counts.queries == before


@given(ferry_access=accesses, payroll_access=accesses, who=principals)
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_no_reader_sees_a_document_they_may_not_read_in_the_log_gaps_or_golden(
    kb: KnowledgeBase, ferry_access: Access | None, payroll_access: Access | None, who: Principal
) -> None:
    ferry, payroll = doc_id(kb, "acme", "Ferry timetable"), doc_id(kb, "acme", "Payroll")
    access = {ferry: ferry_access, payroll: payroll_access}
    try:
        for document, given_access in access.items():
            kb.set_access(document, given_access, tenant="acme")
        kb.search("ferry timetable and salaries", tenant="acme", top_n=10)
        for document in access:
            for helpful in (True, False):
                kb.query_log.record_feedback(
                    "ferry timetable and salaries",
                    f"{document}#0",
                    helpful,
                    document_id=document,
                    tenant="acme",
                    principal=None,
                )
        hidden = {d for d, a in access.items() if not may_read(a, who)}
        seen = kb.query_log_entries(tenant="acme", principal=who)
        shown = {r.document_id for entry in seen for r in entry.results}
        shown |= {f.document_id for f in kb.query_feedback(tenant="acme", principal=who)}
        golden = kb.golden_from_feedback(tenant="acme", principal=who)
        shown |= {d for item in golden for d in [item.expect.document, *item.must_not]}
        assert not shown & hidden
        assert shown == set(access) - hidden  # and everything else is there
        text = "".join(g.model_dump_json() for g in kb.gaps(tenant="acme", principal=who))
        assert not any(document in text for document in hidden)
    finally:
        kb.set_access(ferry, None, tenant="acme")
        kb.set_access(payroll, Access(principals=["user:alice"]), tenant="acme")
        with kb.query_log.database.transaction() as db:
            db.execute("DELETE FROM query_log")
            db.execute("DELETE FROM query_feedback")
