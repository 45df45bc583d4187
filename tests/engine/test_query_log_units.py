"""The query log's parts without a knowledge base (the quick tier): a log written and
read through ``QueryLog`` alone, retention, feedback events straight through
``record_feedback`` (what ``KnowledgeBase.add_feedback`` calls), the golden questions
and the config's errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from flexmatch import Answer, ConfigError, SearchResult, Signals, golden_yaml, load_config
from flexmatch.config import QueryLogConfig
from flexmatch.engine.query.gaps import gaps, golden_items
from flexmatch.engine.query.log import QueryLog
from flexmatch.service.state_db import SqlAlchemyDatabase
from flexmatch.testing import HashEmbedder
from tests.conftest import write_config


def result(chunk: str, dense: float) -> SearchResult:
    document = chunk.split("#")[0]
    return SearchResult(
        chunk_id=chunk,
        document_id=document,
        uri=f"{document}.md",
        source="default",
        title=document,
        heading_path=[],
        content="text",
        qualifying_text="",
        matched_text="text",
        score=0.9,
        signals=Signals(dense=dense),
    )


def log_in(folder: Path, **settings: object) -> QueryLog:
    config = QueryLogConfig.model_validate({"enabled": True, **settings})
    return QueryLog(folder, lambda: config)


def test_a_query_is_logged_by_name_scored_and_counted(tmp_path: Path) -> None:
    log = log_in(tmp_path, good_score=0.5)
    ticks = iter(range(10))
    log.clock = lambda: time.time() + next(ticks)  # one second apart: newest first
    log.record_query(
        Answer(query="ferry", results=[result("a#0", 0.7)]), tenant="t", principal=None
    )
    log.record_query(Answer(query="cake", results=[result("b#0", 0.2)]), tenant="t", principal=None)
    log.record_query(Answer(query="void"), tenant="t", principal=None)
    assert [(e.query, e.good) for e in log.entries("t")] == [
        ("void", False),
        ("cake", False),
        ("ferry", True),
    ]
    assert (log.counts.queries, log.counts.nothing_good) == (3, 2)
    # a reader who may not read document a sees the ferry query find nothing good
    [ferry] = [e for e in log.entries("t", lambda d: d != "a") if e.query == "ferry"]
    assert (ferry.results, ferry.good) == ([], False)
    assert (tmp_path / "query_log.sqlite").stat().st_mode & 0o777 == 0o600


def test_record_feedback_is_kept_counted_and_expires(tmp_path: Path) -> None:
    log = log_in(tmp_path, retention_days=1)
    now = time.time()
    log.clock = lambda: now - 2 * 86_400
    log.record_feedback("old", "a#0", True, document_id="a", tenant="t", principal=None)
    log.clock = lambda: now
    log.record_feedback("new", "a#0", False, document_id="a", tenant="t", principal=None)
    assert [(f.query, f.helpful, f.principal) for f in log.feedback("t")] == [
        ("new", False, "admin")
    ]
    assert log.feedback("other") == []
    assert (log.counts.helpful, log.counts.unhelpful) == (1, 1)


def test_golden_items_expect_the_document_marked_helpful_most(tmp_path: Path) -> None:
    log = log_in(tmp_path)
    for chunk, helpful in [("a#0", True), ("b#1", True), ("b#2", True), ("c#0", False)]:
        doc = chunk.split("#")[0]
        log.record_feedback("q", chunk, helpful, document_id=doc, tenant="t", principal=None)
    items = yaml.safe_load(golden_yaml(golden_items(log.feedback("t"))))
    assert items == [{"question": "q", "expect": {"document": "b"}, "must_not": ["c"]}]


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ("retention_days: 0", "query_log.retention_days"),
        ("good_score: 2", "query_log.good_score"),
        ("group_similarity: 0", "query_log.group_similarity"),
        ("keep: forever", "query_log.keep"),
    ],
)
def test_a_bad_setting_is_one_clear_error(tmp_path: Path, setting: str, words: str) -> None:
    write_config(tmp_path, f"query_log:\n  {setting}\n")
    with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
        load_config(tmp_path)


def test_gaps_count_each_question_once_per_ask_and_mark_most_asked_first(
    tmp_path: Path,
) -> None:
    log = log_in(tmp_path, good_score=0.5)
    for text in ("cake", "cake", "tides", "ferry"):
        dense = 0.9 if text == "ferry" else 0.1
        log.record_query(
            Answer(query=text, results=[result("a#0", dense)]), tenant="t", principal=None
        )
    log.record_feedback("ferry", "a#0", False, document_id="a", tenant="t", principal=None)
    embedder = HashEmbedder()
    found = gaps(log, "t", None, embedder)
    assert [(g.example, g.count, g.nothing_good, g.unhelpful) for g in found] == [
        ("cake", 2, 2, 0),
        ("ferry", 1, 0, 1),
        ("tides", 1, 1, 0),
    ]
    assert embedder.texts == 3  # each distinct query embedded once
    assert gaps(log, "t", lambda d: d != "a", embedder)[0].example == "cake"


def test_replicas_sharing_a_postgresql_database_keep_one_log(
    postgres_url: str, tmp_path: Path
) -> None:
    shared = SqlAlchemyDatabase(postgres_url)
    one, two = log_in(tmp_path / "one"), log_in(tmp_path / "two")
    try:
        one.share(shared)
        two.share(shared)
        one.record_query(
            Answer(query="ferry", results=[result("a#0", 0.7)]), tenant="t", principal=None
        )
        two.record_feedback("ferry", "a#0", True, document_id="a", tenant="t", principal=None)
        assert [e.query for e in two.entries("t")] == ["ferry"]
        assert [f.chunk_id for f in one.feedback("t")] == ["a#0"]
        assert one.entries("other") == []
        assert not (tmp_path / "one" / "query_log.sqlite").exists()
    finally:
        with shared.transaction() as db:
            db.execute("DELETE FROM query_log")
            db.execute("DELETE FROM query_feedback")
        shared.close()


def test_searches_made_while_paused_are_neither_logged_nor_counted(tmp_path: Path) -> None:
    log = log_in(tmp_path)
    with log.paused():
        log.record_query(Answer(query="golden question"), tenant="t", principal=None)
    log.record_query(Answer(query="a user's question"), tenant="t", principal=None)
    assert [e.query for e in log.entries("t")] == ["a user's question"]
    assert log.counts.queries == 1
