"""Which changes a watch counts, and for which source: only what a sync would read
(``include``/``exclude``, no hidden or scratch files, not the knowledge base's own
state), and which sources it cannot watch, saying why; a failed sync (an error, or one
no sync catches) keeps its changes and is tried again, later each time, and the watch goes
on; ``KnowledgeBase.watch`` in Python ends when its ``stop`` is set."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase, SourceSync, SyncReport, WatchEvent, load_config
from flexmatch.engine.embedders import Embedder
from flexmatch.watching import WatchPlan, follow
from tests.conftest import write_config

CONFIG = """\
default_source: notes
sources:
  notes:
    paths: [../notes]
    include: ["*.md"]
    exclude: ["drafts/*"]
  facts:
    type: records
    paths: [../facts.jsonl]
  everything:
    paths: [".."]
  site:
    type: web
    urls: [https://example.com/]
  loose:
    type: files
"""


def _plan(tmp_path: Path) -> WatchPlan:
    kb = tmp_path / "kb"
    write_config(kb, CONFIG)
    (tmp_path / "notes" / "drafts").mkdir(parents=True)
    config = load_config(kb)
    return WatchPlan(config, kb, list(config.sources), [kb / ".flexmatch", kb / "store"])


def test_a_change_counts_for_the_sources_that_read_it(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    notes = tmp_path / "notes"
    assert plan.readers(notes / "tides.md") == ["notes", "everything"]
    assert plan.readers(notes / "tides.txt") == ["everything"]  # not in notes' include
    (notes / "v1.2").mkdir()
    assert plan.readers(notes / "v1.2") == ["notes", "everything"]  # a folder
    assert plan.readers(notes / "drafts" / "x.md") == ["everything"]  # in notes' exclude
    assert plan.readers(notes / "gone") == ["notes", "everything"]  # was it a folder?
    assert plan.readers(tmp_path / "facts.jsonl") == ["facts", "everything"]
    assert plan.readers(notes) == ["notes", "everything"]  # the folder itself (went?)


def test_hidden_scratch_and_state_files_count_for_none(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    notes = tmp_path / "notes"
    for passed_over in (
        notes / ".tides.md.swp",
        notes / ".#tides.md",
        notes / ".git" / "index",
        notes / "4913",
        notes / "tides.md___jb_tmp___",
        tmp_path / "kb" / ".flexmatch" / "qdrant" / "wal",
        tmp_path / "kb" / "store" / "meta.json",
    ):
        assert plan.readers(passed_over) == [], passed_over
    # the knowledge base's own state is passed over, not what a folder walk reads there
    assert plan.readers(tmp_path / "kb" / "flexmatch.yaml") == ["everything"]
    assert plan.readers(tmp_path.parent / "elsewhere.md") == []


def test_sources_without_folders_are_not_watched_and_say_why(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    assert [source.name for source in plan.watched] == ["notes", "facts", "everything"]
    assert "a web source is not watched" in plan.not_watched["site"]
    assert plan.not_watched["loose"] == "no folders to watch: set sources.loose.paths"
    assert plan.roots == [tmp_path / "notes", tmp_path / "facts.jsonl", tmp_path]


def test_a_python_watch_syncs_a_change_and_ends_when_stopped(
    tmp_path: Path, embedder: Embedder
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "tides.md").write_text("# Tides\n\nHigh tide is at noon.\n")
    write_config(tmp_path / "kb", "sources:\n  default:\n    paths: [../notes]\n")
    events: list[WatchEvent] = []
    stop = threading.Event()
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:

        def follow() -> None:
            for event in kb.watch(stop=stop):
                events.append(event)

        watcher = threading.Thread(target=follow)
        watcher.start()
        _wait_for(events, 2)  # the first sync, then "watching"
        (notes / "ferry.md").write_text("# Ferry\n\nThe ferry leaves every hour.\n")
        _wait_for(events, 3)
        stop.set()
        watcher.join(timeout=10)
        assert not watcher.is_alive()
        uris = sorted(Path(record.uri or "").name for record in kb.list_documents())
        assert uris == ["ferry.md", "tides.md"]
    assert [(e.kind, [Path(p).name for p in e.paths]) for e in events] == [
        ("synced", []),
        ("watching", ["notes"]),
        ("synced", ["ferry.md"]),
    ]
    assert events[-1].sync is not None and events[-1].sync.report is not None
    assert events[-1].sync.report.added == 1


def test_a_deletion_while_the_store_is_held_is_synced_once_it_is_free(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("flexmatch.watching.RETRY_MS", 300)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "tides.md").write_text("# Tides\n\nHigh tide is at noon.\n")
    (notes / "ferry.md").write_text("# Ferry\n\nThe ferry leaves every hour.\n")
    kb_dir = tmp_path / "kb"
    write_config(
        kb_dir, "store:\n  lock_timeout: 0.2\nsources:\n  default:\n    paths: [../notes]\n"
    )
    events: list[WatchEvent] = []
    stop = threading.Event()
    with KnowledgeBase.open(kb_dir, embedder=embedder) as kb:

        def follow_changes() -> None:
            for event in kb.watch(stop=stop):
                events.append(event)

        watcher = threading.Thread(target=follow_changes)
        watcher.start()
        try:
            _wait_for(events, 2)  # the first sync, then "watching"
            with KnowledgeBase.open(kb_dir, embedder=embedder) as holder:
                assert len(holder.list_documents()) == 2  # holds the store from now
                (notes / "ferry.md").unlink()
                _wait_for(events, 3)
            _wait_for(events, 4)
        finally:
            stop.set()
            watcher.join(timeout=10)
        assert not watcher.is_alive()
        assert [Path(record.uri or "").name for record in kb.list_documents()] == ["tides.md"]
    held, freed = events[2:4]
    assert held.sync is not None and held.sync.outcome == "failed", held
    assert "in use by another FlexMatch process" in (held.sync.reason or "")
    assert held.retry_seconds == 0.3
    assert freed.sync is not None and freed.sync.report is not None, freed
    assert len(freed.sync.report.removed) == 1 and freed.retry_seconds is None
    assert [Path(p).name for p in freed.paths] == ["ferry.md"]  # kept from the failed one


def test_a_failed_sync_keeps_its_changes_and_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("flexmatch.watching.RETRY_MS", 200)
    monkeypatch.setattr("flexmatch.watching.CHECK_MS", 100)
    notes = tmp_path / "notes"
    notes.mkdir()
    write_config(tmp_path / "kb", "sources:\n  default:\n    paths: [../notes]\n")
    plan = WatchPlan(load_config(tmp_path / "kb"), tmp_path / "kb", ["default"], [])
    # the first sync works; after the change, one raises what no sync catches, the
    # next fails (the store locked, say), the third works
    outcomes = iter(["done", "raise", "failed", "done"])

    def sync(name: str) -> SyncReport:
        outcome = next(outcomes)
        if outcome == "raise":
            raise KeyError("a plug-in's bug")
        entry = SourceSync(name=name, type="files", started=datetime.now(UTC), outcome=outcome)
        return SyncReport(tenant="default", sources=[entry])

    events: list[WatchEvent] = []
    stop = threading.Event()

    def watch() -> None:
        for event in follow(plan, sync, stop):
            events.append(event)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        _wait_for(events, 2)  # the first sync, then "watching"
        (notes / "tides.md").write_text("# Tides\n")
        _wait_for(events, 5)
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert not watcher.is_alive()
    retried = [event for event in events if event.kind == "synced"][1:]
    assert [(e.sync and e.sync.outcome, e.retry_seconds) for e in retried] == [
        ("failed", 0.2),
        ("failed", 0.4),  # the pause doubles
        ("done", None),
    ]
    assert retried[0].sync is not None
    assert retried[0].sync.reason == 'KeyError: "a plug-in\'s bug"'
    assert all([Path(p).name for p in event.paths] == ["tides.md"] for event in retried)


def _wait_for(events: list[WatchEvent], count: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while len(events) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(events) >= count, events
