"""Parsing in worker processes: bounded in time and memory, and never outliving the caller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = """
import sys
from flexmatch import KnowledgeBase
kb = KnowledgeBase.open(sys.argv[1], env={})
kb.ingest([sys.argv[2]])
print("ready", flush=True)
import time
time.sleep(120)
"""


def _children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    note = tmp_path / "note.html"
    note.write_text("<html><body><h1>Note</h1><p>The gate code is 4711.</p></body></html>")
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "kb"), str(note)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        workers = _children(process.pid)
        assert workers, "the parse ran in a worker process"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "a worker outlived its parent"
    finally:
        process.kill()


def _allocate(megabytes: int) -> int:
    return len(bytearray(megabytes * 1024 * 1024))


def test_the_memory_cap_counts_what_a_parse_adds_not_the_parents_mappings() -> None:
    """A forked worker starts with its parent's mappings; a parent that has mapped more
    than the cap (a server with its models) still leaves a parse its full allowance,
    and a parse past it fails with a line naming the setting."""
    import mmap

    from flexmatch.errors import ParseError
    from flexmatch.inputs.isolation import IsolatedPool

    reserved = mmap.mmap(-1, 1024 * 1024 * 1024)  # 1 GB mapped, more than the cap below
    pool = IsolatedPool(workers=1, timeout=30, memory_mb=300)
    try:
        assert pool.run(_allocate, 200, label="fits.html") == 200 * 1024 * 1024
        try:
            pool.run(_allocate, 600, label="huge.html")
        except ParseError as exc:
            assert "huge.html" in str(exc) and "ingest.parse_memory_mb" in str(exc), exc
        else:
            raise AssertionError("a 600 MB parse ran under a 300 MB cap")
    finally:
        pool.close()
        reserved.close()
