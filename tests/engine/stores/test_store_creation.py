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
from flexmatch.config import LOCAL_EMBEDDING_MODEL
from flexmatch.engine.embeddings import LocalEmbedder
from flexmatch.engine.stores.base import DENSE, LEXICAL
from flexmatch.engine.stores.edge import META_FILE, EdgeStore
from flexmatch.errors import StoreError
from tests.conftest import FLEXMATCH, REPO, run

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
    tmp_path: Path, note: Path, embedder: LocalEmbedder, leftover: str
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
    assert meta["embedding_model"] == LOCAL_EMBEDDING_MODEL and meta["dimension"] == 384
    assert not (folder / "shard" / "left-by-the-interrupted-run").exists()
    assert hits and hits[0].uri == str(note) and "opens at nine" in hits[0].content
    assert stats.documents == 1 and stats.chunks == 1
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:  # and it stays a store
        assert kb.ingest([note]).unchanged == 1
        assert kb.query(QUESTION)[0].uri == str(note)


def test_staging_folders_of_dead_processes_are_removed_live_ones_kept(
    tmp_path: Path, note: Path, embedder: LocalEmbedder
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
    tmp_path: Path, note: Path, embedder: LocalEmbedder
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
    with pytest.raises(StoreError, match="point store.path at a new folder"):
        store.prepare(LOCAL_EMBEDDING_MODEL, 384)
    assert (folder / "thesis.tex").exists()


# -- a real kill -9 during the first creation ------------------------------------------------

_PREPARE = """
import sys
from flexmatch import KnowledgeBase
kb = KnowledgeBase.open(sys.argv[1], env={})
print("ready", flush=True)
sys.stdin.readline()
kb.store.prepare(sys.argv[2], 384)
print("created", flush=True)
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


def _kill_during_prepare(kb_dir: Path, milestone: str) -> None:
    """Run ``kb.store.prepare`` in a child process; SIGKILL it at ``milestone``."""
    kb_dir.mkdir(parents=True)
    child = subprocess.Popen(
        [sys.executable, "-c", _PREPARE, str(kb_dir), LOCAL_EMBEDDING_MODEL],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        child.stdin.write("go\n")
        child.stdin.flush()
        seen: Callable[[], bool] = {
            "staging folder made": lambda: bool(_staging(kb_dir)),
            "shard being made": lambda: any((s / "shard").exists() for s in _staging(kb_dir)),
            "metadata written": lambda: any((s / META_FILE).exists() for s in _staging(kb_dir)),
        }[milestone]
        _wait_for(lambda: seen() or child.poll() is not None, 30)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL


def _kill_cli_ingest_during_creation(kb_dir: Path, note: Path) -> None:
    """A real ``flexmatch ingest``, SIGKILLed as soon as its store creation has begun."""
    env = {k: v for k, v in os.environ.items() if k != "FLEXMATCH_KB"}
    child = subprocess.Popen(
        [str(FLEXMATCH), "ingest", "--kb", str(kb_dir), str(note)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(lambda: bool(_staging(kb_dir)) or child.poll() is not None, 120)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL


def test_kill_9_during_the_first_store_creation_then_a_fresh_ingest_works(
    tmp_path: Path, note: Path
) -> None:
    kills: list[tuple[str, Callable[[Path], None]]] = [
        (m, lambda kb, m=m: _kill_during_prepare(kb, m))
        for m in ("staging folder made", "shard being made", "metadata written")
    ]
    kills.append(("flexmatch ingest", lambda kb: _kill_cli_ingest_during_creation(kb, note)))
    left: dict[str, str] = {}
    for index, (point, kill) in enumerate(kills):
        kb_dir = tmp_path / f"kb-{index}"
        kill(kb_dir)
        store_made = (_store_dir(kb_dir) / META_FILE).exists()
        left[point] = "store" if store_made else ("staging" if _staging(kb_dir) else "nothing")
        # never a half store: the store folder is whole (with its metadata) or absent
        assert store_made or not _store_dir(kb_dir).exists(), point

        ingest = run("ingest", "--kb", str(kb_dir), "--json", str(note))
        assert ingest.returncode == 0, f"{point}: {ingest.stderr}"
        report = json.loads(ingest.stdout)
        assert report["added"] == 1 and report["failed"] == [], point
        assert _staging(kb_dir) == [], point  # the dead creator's staging folder is gone
        query = run("query", "--kb", str(kb_dir), "--json", QUESTION)
        assert query.returncode == 0, f"{point}: {query.stderr}"
        results = json.loads(query.stdout)["results"]
        assert results and results[0]["uri"] == str(note), point
        assert "opens at nine" in results[0]["content"], point
    # the kills really landed inside the creation (not all before it, nor all after it)
    assert "staging" in left.values(), left


# -- size ------------------------------------------------------------------------------------


def test_stats_reports_the_disk_really_used(
    tmp_path: Path, note: Path, embedder: LocalEmbedder
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
