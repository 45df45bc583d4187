"""Run a helper program (groff) confined: it may read the system's programs and data
(``/usr``, ``/etc/groff``, …) and write only its own empty folder, nothing else of the
machine: no knowledge base, no configuration, no home folder, no ``/proc``.

The confinement is Linux's Landlock (kernel 5.13 and newer, no privileges needed): a
small launcher, run as ``python -S -E -c``, limits itself and then ``exec``s the
program, so the program and every process it starts inherit the limits and cannot lift
them. A kernel without Landlock runs the program unconfined (``landlock_available``
says which); the program's CPU time is bounded either way (``RLIMIT_CPU``), and its
process group is killed when the caller gives up on it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
from pathlib import Path

# what a confined program may read (and run) besides its own folder: the system's
# programs, libraries and data, and groff's site configuration
READABLE = ("/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/groff", "/etc/papersize")

# the launcher: argv = [cpu seconds, own folder, program, *arguments]. Landlock's
# syscalls (444-446 on every architecture), its first ABI's 13 file-system rights
# (execute, write, read a file, read a folder, remove, make ...), all handled, so
# anything not granted below is refused.
_LAUNCHER = r"""
import ctypes, os, resource, sys
seconds, own, program = int(sys.argv[1]), sys.argv[2], sys.argv[3]
resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))
libc = ctypes.CDLL(None, use_errno=True)
class Ruleset(ctypes.Structure):
    _fields_ = [("handled", ctypes.c_uint64)]
class Beneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent", ctypes.c_int32)]
EVERY, RUN_READ, READ = (1 << 13) - 1, 1 | 4 | 8, 1 | 4
ruleset = libc.syscall(444, ctypes.byref(Ruleset(EVERY)), ctypes.sizeof(Ruleset), 0)
if ruleset >= 0:
    def grant(path, rights):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        if not os.path.isdir(path):
            rights &= READ
        ok = libc.syscall(445, ruleset, 1, ctypes.byref(Beneath(rights, fd)), 0) == 0
        os.close(fd)
        if not ok:
            sys.exit(125)
    for path in READABLE + (os.path.dirname(program),):
        grant(path, RUN_READ)
    grant(own, EVERY)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.syscall(446, ruleset, 0) != 0:
        sys.exit(125)
os.execv(program, sys.argv[3:])
"""


@functools.cache
def landlock_available() -> bool:
    """Whether this kernel confines programs (Landlock's ABI version answers)."""
    if sys.platform != "linux":
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(444, None, 0, 1)) >= 1


def run_confined(
    command: list[str],
    own: Path,
    *,
    stdin: bytes,
    timeout: float,
    env: dict[str, str],
) -> tuple[int, bytes]:
    """``command`` (its program an absolute path) run confined to ``own`` (an empty
    folder, its working folder), fed ``stdin``: its exit status and standard output. Its
    standard error is never read (a confined program's complaints may still quote what
    it was given). Past ``timeout`` seconds its whole process group is killed and
    ``subprocess.TimeoutExpired`` raised."""
    code = f"READABLE = {READABLE!r}\n{_LAUNCHER}"
    argv = [sys.executable, "-S", "-E", "-c", code, str(int(timeout) + 1), str(own), *command]
    process = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=own,
        env=env,
        start_new_session=True,  # its own process group: killed whole, children included
    )
    try:
        out, _ = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        process.communicate()
        raise
    finally:
        if process.poll() is None:  # interrupted: nothing of it is left running
            _kill_group(process.pid)
            process.wait()
    return process.returncode, out


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
