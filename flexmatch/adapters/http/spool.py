"""Uploads wait for their job on disk, not in the server's memory.

A queued upload job used to keep every file's bytes in memory until it ran, so one tenant
could fill the server's memory with uploads. Now each job's files are copied into a
folder of their own under this process's spool folder (mode 700, files 600) and read back
when the job reaches them; the job's folder goes when the job ends, however it ends.

Each server process has its own spool folder (``<base>/<random>``), locked with
``flock`` while the process lives. At start a process removes the folders whose lock it
can take: their process is gone (killed, crashed), so their files have no job any more.
Processes sharing a knowledge base (workers, replicas on one machine) never remove one
another's live files.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger("flexmatch.adapters.http")

LOCK_FILE = ".lock"
_COPY_BUFFER = 1024 * 1024


class UploadSpool:
    """This process's spool folder under ``base``; created on first use."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._own: Path | None = None
        self._lock: int | None = None

    def sweep(self) -> int:
        """Remove the spool folders of processes that are gone; how many were removed."""
        if not self.base.is_dir():
            return 0
        removed = 0
        for folder in self.base.iterdir():
            if folder == self._own or not folder.is_dir():
                continue
            try:
                fd = os.open(folder / LOCK_FILE, os.O_RDWR)
            except FileNotFoundError:  # half made, or never locked: nobody owns it
                fd = None
            except OSError:
                continue
            try:
                if fd is not None:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue  # a live process holds it
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
            finally:
                if fd is not None:
                    os.close(fd)
        if removed:
            log.info("removed %d spool folder(s) left by stopped servers in %s", removed, self.base)
        return removed

    @property
    def folder(self) -> Path:
        """This process's folder (made, locked and its stale siblings swept on first use)."""
        if self._own is None:
            self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.base, 0o700)
            self.sweep()
            own = Path(tempfile.mkdtemp(prefix="p", dir=self.base))  # mode 700
            fd = os.open(own / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._own, self._lock = own, fd
        return self._own

    def job_folder(self) -> Path:
        """A new folder (mode 700) for one job's files."""
        return Path(tempfile.mkdtemp(prefix="job", dir=self.folder))

    @staticmethod
    def write(folder: Path, index: int, source: BinaryIO) -> Path:
        """Copy ``source`` (from its start) into a new owner-only file; blocking: call it
        in a thread."""
        path = folder / f"{index:05d}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            source.seek(0)
            shutil.copyfileobj(source, out, _COPY_BUFFER)
        return path

    @staticmethod
    def remove(folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        """Remove this process's folder (at shutdown, after its jobs stopped)."""
        if self._own is not None:
            shutil.rmtree(self._own, ignore_errors=True)
            self._own = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
