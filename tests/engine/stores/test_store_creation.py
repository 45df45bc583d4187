"""Creating the embedded store: what an interrupted creation leaves is cleared, a folder
that is not a store is refused and left alone, a real kill -9 at any point of the first
creation is recovered by the next ingest, and the store's size is its real disk use."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.config import default_embedding_model
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.stores.base import DENSE, LEXICAL
from flexmatch.engine.stores.edge import META_FILE, EdgeStore
from flexmatch.errors import StoreError
from tests.conftest import FLEXMATCH, REPO, run, write_config

NOTE = "# Harbour office\n\nThe harbour office opens at nine and closes at five.\n"
QUESTION = "When does the harbour office open?"


@pytest.fixture
def note(tmp_path: Path) -> Path:
    path = tmp_path / "docs" / "harbour.md"
    path.parent.mkdir()
    path.write_text(NOTE, encoding="utf-8")
    return path


def _store_dir(kb_dir: Path) -> Path:
    return kb_dir / ".flexmatch" / "qdrant"


def _bare_shard(folder: Path) -> None:
    """What a creation killed after its shard was made but before its metadata was written
    leaves behind: a real shard, made with the store's own config, and nothing else."""
    import qdrant_edge as edge

    config = edge.EdgeConfig(
        vectors={DENSE: edge.EdgeVectorParams(size=384, distance=edge.Distance.Cosine)},
        sparse_vectors={LEXICAL: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
    )
    folder.mkdir(parents=True)
    shard = edge.EdgeShard.create(str(folder / "shard"), config)
    shard.flush()
    shard.close()
    (folder / "shard" / "left-by-the-interrupted-run").write_text("x")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


@pytest.mark.parametrize("leftover", ["bare shard", "empty folder"])
def test_a_store_folder_left_by_an_interrupted_creation_is_created_anew(
    tmp_path: Path, note: Path, embedder: OnnxEmbedder, leftover: str
) -> None:
    kb_dir = tmp_path / "kb"
    folder = _store_dir(kb_dir)
    if leftover == "bare shard":
        _bare_shard(folder)
    else:
        folder.mkdir(parents=True)
    assert not (folder / META_FILE).exists()
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.ingest([note])
        assert report.added == 1 and not report.failed
        hits = kb.query(QUESTION)
        stats = kb.stats()
    meta = json.loads((folder / META_FILE).read_text())
    assert meta["embedding_model"] == default_embedding_model() and meta["dimension"] == 384
    assert not (folder / "shard" / "left-by-the-interrupted-run").exists()
    assert hits and hits[0].uri == str(note) and "opens at nine" in hits[0].content
    assert stats.documents == 1 and stats.chunks == 1
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:  # and it stays a store
        assert kb.ingest([note]).unchanged == 1
        assert kb.query(QUESTION)[0].uri == str(note)


def test_staging_folders_of_dead_processes_are_removed_live_ones_kept(
    tmp_path: Path, note: Path, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    parent = _store_dir(kb_dir).parent
    dead = parent / f".qdrant.creating-{_dead_pid()}-0badf00d"
    live = parent / f".qdrant.creating-{os.getpid()}-cafef00d"
    odd = parent / ".qdrant.creating-notapid-12345678"
    other_store = parent / f".other.creating-{_dead_pid()}-0badf00d"  # not this store's
    for folder in (dead, live, odd, other_store):
        (folder / "shard").mkdir(parents=True)
        (folder / "shard" / "segment").write_bytes(b"x" * 10)
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        assert kb.ingest([note]).added == 1
        assert kb.query(QUESTION)[0].uri == str(note)
    assert not dead.exists()
    assert (live / "shard" / "segment").read_bytes() == b"x" * 10  # its creator still runs
    assert odd.exists() and other_store.exists()
    leftovers = sorted(p.name for p in parent.glob(".qdrant.creating-*"))
    assert leftovers == sorted([live.name, odd.name])  # this creation cleaned up after itself


def test_a_folder_that_is_not_a_store_is_refused_and_left_alone(
    tmp_path: Path, note: Path, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    folder = _store_dir(kb_dir)
    (folder / "shard").mkdir(parents=True)
    (folder / "thesis.tex").write_text("months of work", encoding="utf-8")
    (folder / "shard" / "data.bin").write_bytes(b"\x00\x01")
    before = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    with (
        KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb,
        pytest.raises(StoreError, match="is not a FlexMatch store") as raised,
    ):
        kb.ingest([note])
    assert str(folder) in str(raised.value)
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == before
    assert (folder / "thesis.tex").read_text(encoding="utf-8") == "months of work"
    assert (folder / "shard" / "data.bin").read_bytes() == b"\x00\x01"
    assert not (folder / META_FILE).exists()
    store = EdgeStore(folder)  # the store itself says the same
    with pytest.raises(StoreError, match=r"point store\.path at a new folder"):
        store.prepare(default_embedding_model(), 384)
    assert (folder / "thesis.tex").exists()


# -- a real kill -9 during the first creation ------------------------------------------------

_PREPARE = """
import sys
import time
from flexmatch import KnowledgeBase
kb = KnowledgeBase.open(sys.argv[1], env={})
print("ready", flush=True)
sys.stdin.readline()
kb.store.prepare(sys.argv[2], 384)
print("created", flush=True)
time.sleep(120)  # killed before this ends
"""


def _wait_for(condition: Callable[[], bool], limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.001)
    return False


def _staging(kb_dir: Path) -> list[Path]:
    return list(_store_dir(kb_dir).parent.glob(".qdrant.creating-*"))


def _shard_begun(kb_dir: Path) -> bool:
    return any((staging / "shard").exists() for staging in _staging(kb_dir))


def _store_in_place(kb_dir: Path) -> bool:
    return (_store_dir(kb_dir) / META_FILE).exists()


def _kill_at(child: subprocess.Popen, milestone: Callable[[], bool], limit: float) -> None:
    try:
        assert _wait_for(lambda: milestone() or child.poll() is not None, limit)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL  # it had not finished on its own


def _kill_prepare(kb_dir: Path, milestone: Callable[[Path], bool]) -> None:
    """``kb.store.prepare`` in a child process, SIGKILLed at ``milestone``."""
    kb_dir.mkdir(parents=True)
    child = subprocess.Popen(
        [sys.executable, "-c", _PREPARE, str(kb_dir), default_embedding_model()],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "ready"
    child.stdin.write("go\n")
    child.stdin.flush()
    _kill_at(child, lambda: milestone(kb_dir), 30)


def _kill_cli_ingest(kb_dir: Path, note: Path, after: float | None = None) -> None:
    """A real ``flexmatch ingest``, SIGKILLed while it creates its store's shard (or
    ``after`` seconds, wherever it is then)."""
    write_config(kb_dir, "")  # the CLI refuses a folder that is not a knowledge base
    env = {k: v for k, v in os.environ.items() if k != "FLEXMATCH_KB"}
    child = subprocess.Popen(
        [str(FLEXMATCH), "ingest", "--kb", str(kb_dir), str(note)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if after is None:
        _kill_at(child, lambda: _shard_begun(kb_dir), 120)
    else:
        started = time.monotonic()
        _kill_at(child, lambda: time.monotonic() - started >= after, after + 1)


def test_kill_9_during_the_first_store_creation_then_a_fresh_ingest_works(
    tmp_path: Path, note: Path, embedder: OnnxEmbedder
) -> None:
    kills: dict[str, Callable[[Path], None]] = {
        "flexmatch ingest after 0.5s": lambda kb: _kill_cli_ingest(kb, note, after=0.5),
        "staging folder made": lambda kb: _kill_prepare(kb, lambda k: bool(_staging(k))),
        "flexmatch ingest making the shard": lambda kb: _kill_cli_ingest(kb, note),
        "store in place": lambda kb: _kill_prepare(kb, _store_in_place),
    }
    left: dict[str, str] = {}
    for index, (point, kill) in enumerate(kills.items()):
        kb_dir = tmp_path / f"kb-{index}"
        kill(kb_dir)
        store_made = _store_in_place(kb_dir)
        left[point] = "store" if store_made else ("staging" if _staging(kb_dir) else "nothing")
        # never a half store: the store folder is whole (with its metadata) or absent
        assert store_made or not _store_dir(kb_dir).exists(), point

        write_config(kb_dir, "")  # the CLI ingests into a knowledge base
        ingest = run("ingest", "--kb", str(kb_dir), "--json", str(note))
        assert ingest.returncode == 0, f"{point}: {ingest.stderr}"
        report = json.loads(ingest.stdout)
        assert report["added"] == 1 and report["failed"] == [], point
        assert _staging(kb_dir) == [], point  # the dead creator's staging folder is gone
        # the store the CLI left is whole: opened afresh, it answers (in this process,
        # with the loaded model: a CLI query would only add its start-up)
        with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
            results = kb.query(QUESTION)
        assert results and results[0].uri == str(note), point
        assert "opens at nine" in results[0].content, point
    # the kills really landed inside the creation, and after it
    assert left["flexmatch ingest making the shard"] == "staging", left
    assert left["store in place"] == "store", left


# -- size ------------------------------------------------------------------------------------


def test_stats_reports_the_disk_really_used(
    tmp_path: Path, note: Path, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        kb.ingest([note])
        before = kb.stats().store_bytes
        assert before is not None and before > 0
        folder = _store_dir(kb_dir)
        with (folder / "sparse.bin").open("wb") as handle:
            handle.truncate(200 * 1024 * 1024)  # 200 MB apparent, no block allocated
        assert (folder / "sparse.bin").stat().st_size == 200 * 1024 * 1024
        sparse = kb.stats().store_bytes
        (folder / "dense.bin").write_bytes(os.urandom(1024 * 1024))  # 1 MB really written
        dense = kb.stats().store_bytes
    assert sparse is not None and dense is not None
    assert sparse - before < 1024 * 1024, (before, sparse)
    assert dense - sparse >= 1024 * 1024, (sparse, dense)
    apparent = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert dense < apparent - 150 * 1024 * 1024
