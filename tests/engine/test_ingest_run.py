"""The ingest run as a unit: the plan's size is known from the first progress call, the
report accounts for every input, and reading runs ahead of indexing on its own thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from flexmatch import IngestReport, KnowledgeBase
from flexmatch.engine.documents import ActiveRuns
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.ingest import read_ahead
from tests.conftest import write_config


def test_progress_knows_the_plan_from_the_first_call(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"note{i}.md").write_text(f"# Note {i}\n\nThe note number {i} is here.\n")
    (docs / "corpus.jsonl").write_text(
        '{"_id": "c1", "text": "First line of the corpus."}\n'
        '{"_id": "c2", "text": "Second line of the corpus."}\n'
    )
    write_config(tmp_path / "kb", "sources:\n  default: {}\n")
    seen: list[tuple[int, int]] = []

    def progress(report: IngestReport) -> None:
        seen.append((report.planned, report.processed))

    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        report = kb.ingest([docs, tmp_path / "missing.md"], progress=progress)
    # 3 notes + 2 corpus lines + 1 missing path, known before anything is done
    assert seen[0] == (6, 0)
    assert all(planned == 6 for planned, _ in seen)
    assert seen[-1] == (6, 6)
    assert [done for _, done in seen] == sorted(done for _, done in seen)
    assert report.planned == 6 and report.added == 5 and len(report.failed) == 1
    assert "missing.md: no such file or folder" in report.failed[0].error


def _collect(items: Iterable[int], size: int, stop_after: int | None = None) -> list[int]:
    async def run() -> list[int]:
        seen = []
        async for item in read_ahead(items, size):
            seen.append(item)
            if stop_after is not None and len(seen) == stop_after:
                break
        return seen

    return asyncio.run(run())


def test_read_ahead_hands_over_every_item_in_order_and_raises_the_readers_error() -> None:
    assert _collect(iter(range(50)), 4) == list(range(50))

    def failing() -> Iterator[int]:
        yield 1
        yield 2
        raise OSError("disk gone")

    seen: list[int] = []

    async def run() -> None:
        async for item in read_ahead(failing(), 4):
            seen.append(item)

    with pytest.raises(OSError, match="disk gone"):
        asyncio.run(run())
    assert seen == [1, 2]


def test_read_ahead_reads_at_most_its_size_ahead_and_stops_when_left() -> None:
    """The reader thread (parsing files, fetching pages) runs ahead of the indexing, but
    not far: nothing is parsed that nobody will take."""
    produced: list[int] = []

    def items() -> Iterator[int]:
        for n in range(1000):
            produced.append(n)
            yield n

    before = set(threading.enumerate())
    assert _collect(items(), 3, stop_after=2) == [0, 1]
    readers = [t for t in set(threading.enumerate()) - before if t.name == "flexmatch-reader"]
    for reader in readers:  # it notices at its next hand-over (it polls every 0.1 s)
        reader.join(timeout=10)
        assert not reader.is_alive()
    assert len(produced) <= 2 + 3 + 1  # taken, waiting, and the one being handed over


def test_runs_starting_on_two_threads_repair_once_and_never_each_others_pending() -> None:
    active = ActiveRuns()
    repairing = threading.Event()
    let_go = threading.Event()
    repairs: list[str] = []

    def slow_repair() -> int:
        repairs.append(threading.current_thread().name)
        repairing.set()
        assert let_go.wait(10)
        return 3

    found: dict[str, int] = {}
    first = threading.Thread(target=lambda: found.update(a=active.enter("t", slow_repair)))
    first.start()
    assert repairing.wait(10)  # the first run repairs; a second starts meanwhile
    second = threading.Thread(target=lambda: found.update(b=active.enter("t", slow_repair)))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # it waits for the first run's repair and entry
    let_go.set()
    first.join(10)
    second.join(10)
    assert found == {"a": 3, "b": 0} and len(repairs) == 1
    active.leave("t")
    active.leave("t")
    assert active.enter("t", lambda: 5) == 5  # none running: a new run repairs again
