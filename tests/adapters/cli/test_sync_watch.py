"""``flexmatch sync --watch`` through the real command: it syncs, then sees a file edited
(a burst of saves: one sync), added and deleted, each in the index within seconds while
``flexmatch query`` and ``docs list`` still open the store; a folder that goes away is
reported and the rest still watched; a sync that fails (the store held by another
process) keeps its changes and is tried again; Ctrl-C or SIGTERM stops it with exit 130."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import flexmatch as fm
from flexmatch.adapters.cli.sync_watch import say
from tests.adapters.cli.test_sync import NOTES, _folder, _found, _uris
from tests.conftest import FLEXMATCH, held_store, run, write_config

# a query that found the store locked would wait 5 s, then fail: the watch must not hold it
CONFIG = """\
store:
  lock_timeout: 5
sources:
  default:
    paths: [{paths}]
"""
WAIT = 20.0  # seconds for a change to reach the index
FIRST_WAIT = 90.0  # for the first sync, which loads the embedding model too


class Watch:
    """A running ``flexmatch sync --watch --json``, its JSON lines read as they come."""

    def __init__(self, kb: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "FLEXMATCH_KB"}
        self.errors = kb / "watch.err"
        with self.errors.open("w") as errors:
            self.process = subprocess.Popen(
                [str(FLEXMATCH), "sync", "--watch", "--json", "--kb", str(kb)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def next(self, kind: str, wait: float = WAIT) -> dict[str, Any]:
        """The next event; it must be of ``kind`` (nothing else happened meanwhile)."""
        try:
            event = self.lines.get(timeout=wait)
        except queue.Empty:
            raise AssertionError(f"no {kind} event in {wait:.0f}s; stderr: {self.stderr}") from None
        assert event.get("kind") == kind, event
        return event

    def synced(self, wait: float = WAIT) -> dict[str, Any]:
        event = self.next("synced", wait)
        assert event["sync"]["outcome"] == "done", event
        return event

    @property
    def stderr(self) -> str:
        return self.errors.read_text()

    def stop(self, signum: int) -> dict[str, Any]:
        """Stop it with ``signum``: it exits 130, its last line says what it did."""
        self.process.send_signal(signum)
        assert self.process.wait(timeout=30) == 130, self.stderr
        self.reader.join(timeout=10)
        last: dict[str, Any] = {}
        while not self.lines.empty():
            last = self.lines.get()
        return last


@pytest.fixture
def watching() -> Iterator[list[Watch]]:
    """The watches a test started; one a failed test left running is killed."""
    started: list[Watch] = []
    yield started
    for watch in started:
        if watch.process.poll() is None:
            watch.process.kill()
            watch.process.wait(timeout=10)


def _names(event: dict[str, Any]) -> list[str]:
    return [Path(path).name for path in event["paths"]]


def test_an_edit_an_addition_and_a_deletion_each_reach_the_index(
    tmp_path: Path, watching: list[Watch]
) -> None:
    notes = _folder(tmp_path, {k: NOTES[k] for k in ("tides.md", "market.md")})
    kb = tmp_path / "kb"
    write_config(kb, CONFIG.format(paths="../notes"))
    watch = Watch(kb)
    watching.append(watch)
    first = watch.synced(FIRST_WAIT)
    assert first["paths"] == [] and first["sync"]["report"]["added"] == 2
    assert watch.next("watching")["paths"] == [str(notes)]

    # editor litter first (never a change a sync reads), then a burst of five saves
    (notes / ".tides.md.swp").write_text("swap")
    (notes / "4913").write_text("")
    (notes / "4913").unlink()
    for minute in range(5):
        (notes / "tides.md").write_text(f"# Tides\n\nLow tide at the harbour is at 6:0{minute}.\n")
        time.sleep(0.02)
    edited = watch.synced()
    assert _names(edited) == ["tides.md"]
    assert edited["sync"]["report"]["changed"] == 1
    assert "tides.md" in _found(kb, "when is low tide at the harbour")[:1]

    (notes / "ferry.md").write_text(NOTES["ferry.md"])
    added = watch.synced()  # the burst above made one sync, not two
    assert _names(added) == ["ferry.md"] and added["sync"]["report"]["added"] == 1
    assert _uris(kb) == ["ferry.md", "market.md", "tides.md"]

    (notes / "market.md").unlink()
    removed = watch.synced()
    assert _names(removed) == ["market.md"]
    assert [Path(uri).name for uri in removed["sync"]["report"]["removed"]] == ["market.md"]
    assert _uris(kb) == ["ferry.md", "tides.md"]
    assert "market.md" not in _found(kb, "when does the fish market open")

    summary = watch.stop(signal.SIGINT)
    assert summary["interrupted"] is True
    assert (summary["added"], summary["changed"]) == (3, 1)


def test_a_folder_that_goes_is_reported_and_the_rest_still_watched(
    tmp_path: Path, watching: list[Watch]
) -> None:
    notes = _folder(tmp_path, {"tides.md": NOTES["tides.md"]})
    more = tmp_path / "more"
    more.mkdir()
    kb = tmp_path / "kb"
    write_config(kb, CONFIG.format(paths="../notes, ../more"))
    watch = Watch(kb)
    watching.append(watch)
    watch.synced(FIRST_WAIT)
    assert watch.next("watching")["paths"] == [str(notes), str(more)]

    shutil.rmtree(more)
    gone = watch.next("gone")
    assert gone["paths"] == [str(more)] and "not found" in gone["reason"]
    after = watch.next("synced")  # what the source still reads stays; nothing is pruned
    assert after["sync"]["report"]["removed"] == []

    (notes / "ferry.md").write_text(NOTES["ferry.md"])
    assert _names(watch.next("synced")) == ["ferry.md"]

    more.mkdir()
    (more / "market.md").write_text(NOTES["market.md"])
    assert watch.next("back")["paths"] == [str(more)]
    assert watch.next("synced")["sync"]["report"]["added"] == 1
    assert _uris(kb) == ["ferry.md", "market.md", "tides.md"]

    assert watch.stop(signal.SIGTERM)["interrupted"] is True


def test_a_deletion_while_the_store_is_held_reaches_the_index_once_it_is_free(
    tmp_path: Path, watching: list[Watch]
) -> None:
    notes = _folder(tmp_path, {k: NOTES[k] for k in ("tides.md", "market.md")})
    kb = tmp_path / "kb"
    write_config(kb, CONFIG.format(paths="../notes").replace("lock_timeout: 5", "lock_timeout: 1"))
    watch = Watch(kb)
    watching.append(watch)
    watch.synced(FIRST_WAIT)
    watch.next("watching")

    with held_store(kb):
        (notes / "market.md").unlink()
        failed = watch.next("synced")
    assert failed["sync"]["outcome"] == "failed", failed
    assert "in use by another FlexMatch process" in failed["sync"]["reason"]
    assert failed["retry_seconds"] == 2
    retried = watch.synced()  # no other change needed
    assert _names(retried) == ["market.md"] and retried["retry_seconds"] is None
    assert [Path(uri).name for uri in retried["sync"]["report"]["removed"]] == ["market.md"]
    assert "market.md" not in _found(kb, "when does the fish market open")
    assert watch.stop(signal.SIGTERM)["interrupted"] is True


def test_a_failed_sync_says_when_it_is_tried_again(capsys: pytest.CaptureFixture[str]) -> None:
    entry = fm.SourceSync(
        name="notes",
        type="files",
        started=datetime.now(UTC),
        outcome="failed",
        reason="the store is in use by another FlexMatch process",
    )
    say(
        fm.WatchEvent(kind="synced", source="notes", paths=["/n/a.md"], sync=entry, retry_seconds=4)
    )
    assert capsys.readouterr().out.endswith(
        "notes failed: the store is in use by another FlexMatch process after changes to "
        "/n/a.md; tried again in 4s\n"
    )


def test_with_no_folder_to_watch_it_syncs_once_and_says_so(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write_config(kb, "default_source: site\nsources:\n  site:\n    type: web\n")
    result = run("sync", "--watch", "--kb", str(kb))
    assert result.returncode == 2
    assert "site skipped: nothing to list: set sources.site.urls" in result.stdout
    assert "site not watched: a web source is not watched" in result.stderr
    assert "Nothing to watch" in result.stderr
