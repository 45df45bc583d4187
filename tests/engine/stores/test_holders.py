"""Who holds the embedded store, told from the kernel: the serve lock's holder, the
addresses a process listens on, and an EdgeStore that refuses a served store at once."""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexmatch.engine.stores.edge import EdgeStore
from flexmatch.engine.stores.holders import _address, listening, serve_lock_path, served_by
from flexmatch.errors import StoreError


@pytest.fixture
def serve_lock(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """The store's serve lock held here, as ``claim_store`` holds it, for another pid (the
    parent: a process that exists and is not this one)."""
    store = tmp_path / ".flexmatch" / "qdrant"
    store.parent.mkdir(parents=True)
    fd = os.open(serve_lock_path(store), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, str(os.getppid()).encode())
    try:
        yield store, os.getppid()
    finally:
        os.close(fd)


def test_a_held_serve_lock_names_its_pid_and_a_free_one_nothing(
    serve_lock: tuple[Path, int], tmp_path: Path
) -> None:
    store, pid = serve_lock
    holder = served_by(store)
    assert holder is not None and holder.pid == pid
    assert holder.describe().startswith(f"pid {pid}")
    assert served_by(tmp_path / "never-served") is None


def test_the_server_itself_is_not_refused(tmp_path: Path) -> None:
    store = tmp_path / "qdrant"
    with open(serve_lock_path(store), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(str(os.getpid()))
        lock.flush()
        assert served_by(store) is None  # held by this very process
    assert served_by(store) is None  # released: a stale pid in the file means nothing


def test_edge_store_refuses_a_served_store_at_once(serve_lock: tuple[Path, int]) -> None:
    store, pid = serve_lock
    started = time.monotonic()
    with pytest.raises(StoreError, match=f"held by `flexmatch serve` \\(pid {pid}"):
        EdgeStore(store, lock_timeout=30).prepare("local/test", 4)  # would create it
    assert not store.exists()
    assert time.monotonic() - started < 10  # a loaded machine's moment, never the 30 s wait


def test_listening_addresses_of_a_process() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        port = server.getsockname()[1]
        assert f"127.0.0.1:{port}" in listening(os.getpid())
    finally:
        server.close()
    assert f"127.0.0.1:{port}" not in listening(os.getpid())


def test_kernel_addresses_read_as_people_write_them() -> None:
    assert _address("0100007F:1F40", v6=False) == "127.0.0.1:8000"
    assert _address("00000000:1F40", v6=False) == "127.0.0.1:8000"  # 0.0.0.0: loopback works
    assert _address("00000000000000000000000001000000:0050", v6=True) == "[::1]:80"
