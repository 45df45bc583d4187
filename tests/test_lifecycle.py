"""Worker processes hold nothing of their parent's that must stay its own (the listening
socket, the store's lock), die with it, and survive the thread that forked them."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.lifecycle import die_with_parent, drop_inherited
from tests.inputs.test_isolation import _alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def _child(talk: socket.socket) -> None:
    dropped = drop_inherited()
    talk.sendall(f"{' '.join(map(str, dropped))}\n".encode())  # a connected socket stays usable
    time.sleep(60)


def test_a_forked_child_lets_go_of_listening_sockets_and_locks(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    lock_path = tmp_path / "store.lock"
    locked = lock_path.open("w")
    fcntl.flock(locked, fcntl.LOCK_EX | fcntl.LOCK_NB)
    mine, theirs = socket.socketpair()
    child = multiprocessing.get_context("fork").Process(target=_child, args=(theirs,))
    child.start()
    try:
        mine.settimeout(30)
        dropped = {int(fd) for fd in mine.recv(4096).split()}
        # the listener and the lock (others the test process holds may be dropped too),
        # never the connected socket it talks on
        assert {listener.fileno(), locked.fileno()} <= dropped
        assert theirs.fileno() not in dropped
        listener.close()
        locked.close()
        again = socket.socket()  # the port is free: the child does not hold it
        again.bind(("127.0.0.1", port))
        again.listen(1)
        again.close()
        with lock_path.open("w") as other:  # and neither does it hold the lock
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        child.kill()
        child.join(10)
        mine.close()
        theirs.close()


TIED = """
import multiprocessing, os, sys, time
from flexmatch.lifecycle import die_with_parent

def child(parent):
    die_with_parent(parent)
    os.write(1, b"armed\\n")  # one write each: the two lines never interleave
    time.sleep(60)

worker = multiprocessing.get_context("fork").Process(target=child, args=(os.getpid(),))
worker.start()
os.write(1, f"{worker.pid}\\n".encode())
time.sleep(60)
"""


def test_a_worker_dies_with_its_killed_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", TIED], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        # the worker's pid and its word that it has armed its signal, in either order
        lines = {parent.stdout.readline().strip() for _ in range(2)}
        assert "armed" in lines, lines
        (worker,) = (int(line) for line in lines - {"armed"})
        assert _alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 30  # sent at once, ended when a loaded machine gets to it
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker), "the worker outlived its parent"
    finally:
        parent.kill()
        parent.wait(10)


def _orphaned() -> None:
    die_with_parent(os.getppid() + 1_000_000)  # as if its parent were already gone
    time.sleep(60)


def test_a_worker_whose_parent_is_already_gone_ends_at_once() -> None:
    worker = multiprocessing.get_context("fork").Process(target=_orphaned)
    worker.start()
    worker.join(10)
    assert worker.exitcode == 1


def _pid() -> int:
    return os.getpid()


def test_workers_outlive_the_short_lived_thread_that_first_used_the_pool() -> None:
    """The parent-death signal follows the forking thread: a pool first used from a
    request's worker thread must not lose its workers when that thread ends."""
    pool = IsolatedPool(workers=1, timeout=30)
    first: list[int] = []
    try:
        thread = threading.Thread(target=lambda: first.append(pool.run(_pid, label="t")))
        thread.start()
        thread.join(60)
        assert first and _alive(first[0])
        time.sleep(0.5)  # the thread is gone
        assert _alive(first[0]), "the worker died with the thread that started the pool"
        assert pool.run(_pid, label="again") == first[0]
    finally:
        pool.close()
