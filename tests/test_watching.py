"""Which changes a watch counts, and for which source: only what a sync would read
(``include``/``exclude``, no hidden or scratch files, not the knowledge base's own
state), and which sources it cannot watch, saying why; ``KnowledgeBase.watch`` in
Python ends when its ``stop`` is set."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from flexmatch import KnowledgeBase, WatchEvent, load_config
from flexmatch.engine.embedders import Embedder
from flexmatch.watching import WatchPlan
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


def _wait_for(events: list[WatchEvent], count: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while len(events) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(events) >= count, events
