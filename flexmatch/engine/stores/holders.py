"""Who holds the embedded store: so a command that cannot have it says whom to ask.

The engine (qdrant-edge) has no read-only open: ``EdgeShard.load`` takes an exclusive
flock on the shard's ``wal`` folder, and a second process fails with ``WouldBlock``
(measured: ~0.3 s to fail, whatever another process is doing). ``flexmatch serve`` holds
the store for as long as it runs, and claims the knowledge base first with a flock on
``<store>.serve-lock`` holding its pid. So a command meeting a served knowledge base
fails at once, naming the server (pid, the addresses it listens on) and its HTTP API;
waiting could only end in "in use". A short-lived holder (another CLI ingest) is
waited for, and named if the wait runs out.

The pid and addresses come from the kernel (``/proc/locks``, ``/proc/PID/fd``,
``/proc/net/tcp*``) on Linux; elsewhere, or for another user's process, they are
simply left out.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

SERVE_LOCK_SUFFIX = ".serve-lock"  # the file ``flexmatch serve`` flocks (claim_store)
IN_USE = "is in use by another FlexMatch process"  # how a store held elsewhere is refused
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp


def serve_lock_path(store: Path) -> Path:
    """The file a server claims the embedded store ``store`` with."""
    return store.parent / f"{store.name}{SERVE_LOCK_SUFFIX}"


@dataclass(frozen=True)
class Holder:
    """A process holding a store: its pid, its command line and where it listens."""

    pid: int
    command: str = ""
    addresses: list[str] = field(default_factory=list)

    @property
    def url(self) -> str | None:
        """The first address as a URL a person can use (``0.0.0.0`` as loopback)."""
        return f"http://{self.addresses[0]}" if self.addresses else None

    def describe(self) -> str:
        """``pid 1234: flexmatch serve --kb kb, listening on http://127.0.0.1:8000``, with
        the parts that are known."""
        if not self.pid:
            return "pid unknown"
        text = f"pid {self.pid}"
        if self.command:
            text += f": {self.command}"
        if self.addresses:
            text += ", listening on " + ", ".join(f"http://{a}" for a in self.addresses)
        return text


def served_by(store: Path) -> Holder | None:
    """The *other* process serving the store at ``store`` (``flexmatch serve`` holding
    its serve lock), or None. Cheap: one open and one non-blocking flock."""
    lock = serve_lock_path(store)
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None  # never served, or not readable: the store's own lock decides
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 64).decode("ascii", "replace").strip()
        except OSError:
            return None
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
    finally:
        os.close(fd)
    pid = int(text) if text.isdigit() else 0
    if pid == os.getpid():
        return None  # this process is the server
    return describe(pid) if pid else Holder(pid=0)


def lock_holder(path: Path) -> Holder | None:
    """The process holding a flock on ``path`` (the shard's ``wal`` folder), from
    ``/proc/locks``; None where that cannot be told."""
    try:
        stat = path.stat()
        with open("/proc/locks", encoding="ascii") as locks:
            lines = locks.read().splitlines()
    except OSError:
        return None
    wanted = (os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino)
    for line in lines:
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK" or "->" in parts:
            continue  # a waiter ("->") holds nothing
        with contextlib.suppress(ValueError):
            major, minor, inode = parts[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == wanted:
                pid = int(parts[4])
                return describe(pid) if pid != os.getpid() else None
    return None


def describe(pid: int) -> Holder:
    """What the kernel tells about ``pid``: its command line and listening addresses."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        command = " ".join(_args(raw))[:160]
    except OSError:
        command = ""
    return Holder(pid=pid, command=command, addresses=listening(pid))


def _args(raw: bytes) -> list[str]:
    """A command line's arguments; a Python console script runs as ``python flexmatch
    ...``, shown from the script on."""
    args = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    if len(args) > 1 and Path(args[0]).name.startswith("python"):
        args = args[1:]
    return [Path(args[0]).name, *args[1:]] if args else []


def listening(pid: int) -> list[str]:
    """The TCP addresses ``pid`` listens on (``host:port``), wildcards shown as loopback."""
    try:
        sockets = {
            target[8:-1]
            for name in os.listdir(f"/proc/{pid}/fd")
            if (target := _readlink(f"/proc/{pid}/fd/{name}")).startswith("socket:[")
        }
    except OSError:
        return []
    found: list[str] = []
    for table, v6 in ((f"/proc/{pid}/net/tcp", False), (f"/proc/{pid}/net/tcp6", True)):
        try:
            with open(table, encoding="ascii") as rows:
                next(rows, None)
                for row in rows:
                    cells = row.split()
                    if len(cells) > 9 and cells[3] == _LISTEN and cells[9] in sockets:
                        found.append(_address(cells[1], v6))
        except OSError:
            continue
    return list(dict.fromkeys(found))


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _address(hex_address: str, v6: bool) -> str:
    """``0100007F:1F40`` → ``127.0.0.1:8000`` (the kernel's table, little-endian words)."""
    host_hex, port_hex = hex_address.split(":")
    raw = bytes.fromhex(host_hex)
    packed = raw  # each 32-bit word is in the host's byte order
    if sys.byteorder == "little":
        packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    host = ipaddress.ip_address(packed)
    if host.is_unspecified:
        host = ipaddress.ip_address("::1" if v6 else "127.0.0.1")
    if isinstance(host, ipaddress.IPv6Address) and host.ipv4_mapped:
        host = host.ipv4_mapped
    port = int(port_hex, 16)
    return f"[{host}]:{port}" if isinstance(host, ipaddress.IPv6Address) else f"{host}:{port}"
