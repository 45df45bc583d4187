"""The store, the document archive, the keys database and the LLM cache are their owner's
alone: folders 700 (``.flexmatch`` too), files 600, whatever the process's umask, and a
store, archive or cache made before is narrowed when it is opened."""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexmatch.engine.archive import DocumentArchive
from flexmatch.engine.llm_cache import LLMCache
from flexmatch.engine.stores.base import StoredPoint
from flexmatch.engine.stores.edge import EdgeStore
from flexmatch.models import Document, Element
from flexmatch.service.keys import KeyStore


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The common default, which leaves new files readable by everyone (644)."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _modes(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        if not path.is_symlink():
            found[str(path.relative_to(root))] = stat.S_IMODE(path.stat().st_mode)
    return found


def _open_to_others(root: Path) -> dict[str, str]:
    """Every file or folder under ``root`` that grants anything to group or others."""
    return {name: oct(mode) for name, mode in _modes(root).items() if mode & 0o077}


def _store(path: Path) -> EdgeStore:
    store = EdgeStore(path)
    store.prepare("test-model", 4)
    store.upsert(
        "acme",
        [StoredPoint(id=str(uuid.uuid4()), vector=[0.1, 0.2, 0.3, 0.4], text="the gate code")],
    )
    return store


def test_the_store_is_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "kb" / ".flexmatch" / "qdrant"
    store = _store(path)
    store.close()
    modes = _modes(path)
    assert modes["."] == 0o700 and len(modes) > 3
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700  # .flexmatch, made by the store
    assert not _open_to_others(path)
    assert all(m == 0o600 for n, m in modes.items() if (path / n).is_file())


def test_a_new_store_is_owner_only_before_it_is_first_opened(tmp_path: Path) -> None:
    """It is renamed into place whole: no moment where another user could read it."""
    path = tmp_path / "store"
    EdgeStore(path)._create("test-model", 4)
    assert _modes(path)["."] == 0o700 and not _open_to_others(path)


def test_a_store_made_world_readable_is_narrowed_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "store"
    _store(path).close()
    for name in _modes(path):  # as an older version (or a copy) left it
        target = path / name
        os.chmod(target, 0o755 if target.is_dir() else 0o644)
    assert _open_to_others(path)
    reopened = EdgeStore(path)
    assert reopened.count("acme") == 1
    assert not _open_to_others(path)  # on opening, not only on closing
    reopened.close()
    assert not _open_to_others(path)


def test_the_llm_cache_is_owner_only(tmp_path: Path) -> None:
    path = tmp_path / ".flexmatch" / "llm-cache.sqlite"
    cache = LLMCache(path)
    cache.put("k", "an answer", {"tokens": 3})
    assert _modes(path.parent)["."] == 0o700
    written = sorted(p.name for p in path.parent.iterdir())
    assert written == ["llm-cache.sqlite", "llm-cache.sqlite-shm", "llm-cache.sqlite-wal"]
    assert {n: oct(m) for n, m in _modes(path.parent).items() if n != "."} == {
        name: "0o600" for name in written
    }
    cache.close()
    for name in written:
        if (path.parent / name).exists():
            os.chmod(path.parent / name, 0o644)  # a cache made before
    again = LLMCache(path)
    assert again.get("k") == ("an answer", {"tokens": 3})
    again.close()
    files = [p for p in path.parent.iterdir() if p.is_file()]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)


def _archived(folder: Path) -> DocumentArchive:
    archive = DocumentArchive(folder)
    for number in range(3):
        document = Document(
            id=f"doc-{number}",
            uri=f"upload://doc-{number}.md",
            source="default",
            title="Gate",
            elements=[Element(kind="paragraph", text="The gate code is 4711.")],
            original=b"The gate code is 4711.",
            original_name="gate.md",
        )
        archive.put("acme", document)
    return archive


def test_the_archive_is_owner_only(tmp_path: Path) -> None:
    """Folders 700, not only files 600: another user cannot list or count the entries."""
    state = tmp_path / "kb" / ".flexmatch"
    archive = _archived(state / "archive")
    assert archive.original("acme", "doc-1") is not None
    modes = _modes(state)
    assert {"archive/documents", "archive/originals"} <= set(modes)
    assert len([n for n in modes if n.startswith("archive/originals/")]) >= 2  # shard, file
    assert not _open_to_others(state), _open_to_others(state)


def test_an_archive_made_world_readable_is_narrowed_when_opened(tmp_path: Path) -> None:
    state = tmp_path / ".flexmatch"
    _archived(state / "archive")
    for path in (state, *state.rglob("*")):  # as an older version left its folders
        if path.is_dir():
            os.chmod(path, 0o755)
    assert _open_to_others(state)
    archive = DocumentArchive(state / "archive")
    assert not _open_to_others(state), _open_to_others(state)
    assert archive.get("acme", "doc-0") is not None


def test_the_keys_database_folder_is_owner_only(tmp_path: Path) -> None:
    KeyStore.for_kb(tmp_path / "kb").create("acme", "read")
    assert stat.S_IMODE((tmp_path / "kb").stat().st_mode) == 0o755  # the user's folder
    assert not _open_to_others(tmp_path / "kb" / ".flexmatch")
