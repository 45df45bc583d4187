"""Child processes that never outlive, nor hold anything of, the process that started them.

A forked worker inherits every open descriptor of its parent, close-on-exec or not (it
never execs): a server's listening socket and the embedded store's lock among them. Had
the server been killed (``kill -9``, the OOM killer), a worker kept both, and a restart
failed with "store in use" and then "address already in use". So each worker asks the
kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``) and, right after the fork,
lets go of the descriptors that must stay the parent's alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import socket
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# lock kinds held by an open file (not a process): a forked child shares them
_SHARED_LOCKS = ("FLOCK", "OFDLCK")


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when ``parent`` ends (Linux; a no-op elsewhere).

    The kernel's "parent" is the *thread* that forked this process, so workers must be
    forked from a thread that lives as long as they may (``IsolatedPool`` keeps one).
    ``parent`` closes the race of a parent that died before the call: then this process
    ends at once."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent and os.getppid() != parent:
        os._exit(1)


def _listening(fd: int) -> bool:
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return False
    try:
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
    except OSError:
        return False
    finally:
        sock.detach()  # the descriptor is not this object's to close


def _locked(fd: int) -> bool:
    """The open file behind ``fd`` holds a lock that came with the fork (flock / OFD)."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as info:
            return any(
                line.startswith("lock:") and any(kind in line for kind in _SHARED_LOCKS)
                for line in info
            )
    except OSError:
        return False


def drop_inherited() -> list[int]:
    """In a freshly forked child: release the listening sockets and locked files it
    inherited (Linux; elsewhere nothing). Each such descriptor is pointed at /dev/null
    rather than closed, so its number stays taken and an object of the parent's that
    still names it can never close a descriptor this child opens later. Returns them."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return []
    dropped = []
    for fd in fds:
        if fd <= 2:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if (target.startswith("socket:") and _listening(fd)) or (
            target.startswith("/") and _locked(fd)
        ):
            dropped.append(fd)
    if dropped:
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            for fd in dropped:
                os.dup2(null, fd, inheritable=False)
        finally:
            os.close(null)
    return dropped


# A long-running server's full collections are pauses of every thread: while an ingest
# holds millions of objects (a 5 MB script's 48,000 chunks, their vectors and points)
# each one took up to 0.6 s and found nothing to free. Young generations are collected
# as usual (they free the cycles a request or a job leaves behind); full collections do
# not run by themselves.
YOUNG_THRESHOLD = 10_000  # allocations between two collections of the youngest generation
FULL_THRESHOLD = 1_000_000  # middle-generation collections between two full ones: never


def quiet_collector() -> None:
    """Freeze what start-up made (never scanned again) and stop automatic full
    collections; call once when a server has started."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, 10, FULL_THRESHOLD)
