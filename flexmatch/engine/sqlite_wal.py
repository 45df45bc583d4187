"""Setting up the SQLite files a knowledge base keeps (the service state, the query log,
the LLM cache), the one way every process can share them."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable

BUSY_TIMEOUT = 10.0  # seconds a write waits for another process's write to finish


def prepare(connection: sqlite3.Connection, schema: Iterable[str] = ()) -> None:
    """Put the file in WAL mode (readers never wait for a writer; the -wal and -shm files
    take the file's mode) and run ``schema``'s ``CREATE ... IF NOT EXISTS`` statements.

    Switching the journal mode takes the file's exclusive lock, and SQLite answers
    "database is locked" at once, without its busy handler, while another connection is
    switching or opening it (replicas starting together, threads of one process): that is
    retried within ``BUSY_TIMEOUT``. WAL mode stays with the file, so once it is set the
    switch is skipped."""
    statements = list(schema)
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
            with connection:
                for statement in statements:
                    connection.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
