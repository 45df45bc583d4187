"""The query log: what people ask, what they got, and what they said of it.

Every query through ``Querier.search`` (the Python API, the CLI, HTTP, MCP, the agent
tools and the client's server all pass there) is counted (``QueryCounts``, which
``/metrics`` reads); when ``query_log.enabled`` is set, it is also written down: when,
the tenant, who asked (a principal's name, never a key or a header), the query text and
its results (chunk and document ids, scores). Feedback events come through
``record_feedback``. Entries older than ``query_log.retention_days`` are deleted, at most
once a minute as new ones are written, and are never read back.

Reading is scoped by the caller (``KnowledgeBase.query_log_entries``): one tenant's
entries only, and only the results and feedback on documents the reader may read.

The log is a SQLite file in the knowledge base's ``.flexmatch`` folder (owner-only, like
the LLM cache): the Python API, the CLI and MCP have no service database. A server whose
replicas share ``service.state_url`` hands its shared database in (``share``), so every
replica writes and reads one log. The statements are plain SQL with ``:name``
parameters, which both take.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from flexmatch.access import Principal, principal_name
from flexmatch.config import QueryLogConfig
from flexmatch.engine.folders import private_folder
from flexmatch.engine.sqlite_wal import BUSY_TIMEOUT, prepare
from flexmatch.models.querylog import FeedbackEvent, LogEntry, LoggedResult
from flexmatch.results import Answer

LOG_FILE = "query_log.sqlite"
PRUNE_EVERY = 60.0  # seconds between deletions of expired entries, per process
DAY_NS = 86_400 * 1_000_000_000

# the tables, in SQLite; ``flexmatch.service.state_db`` declares the same for a shared
# database
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS query_log (
        id TEXT PRIMARY KEY,
        at_ns INTEGER NOT NULL,
        tenant TEXT NOT NULL,
        principal TEXT NOT NULL,
        query TEXT NOT NULL,
        results TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS query_log_by_tenant ON query_log (tenant, at_ns)",
    """CREATE TABLE IF NOT EXISTS query_feedback (
        id TEXT PRIMARY KEY,
        at_ns INTEGER NOT NULL,
        tenant TEXT NOT NULL,
        principal TEXT NOT NULL,
        query TEXT NOT NULL,
        chunk_id TEXT NOT NULL,
        document_id TEXT NOT NULL,
        helpful INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS query_feedback_by_tenant ON query_feedback (tenant, at_ns)",
)


class Rows(Protocol):
    rows: list[tuple[Any, ...]]


class Statements(Protocol):
    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> Rows: ...


class LogDatabase(Protocol):
    """Where the log is kept: one short transaction at a time (the service's shared
    ``state_db.Database`` is one)."""

    def transaction(self, *, create: bool = True) -> contextlib.AbstractContextManager[Any]: ...


@dataclass
class _Result:
    rows: list[tuple[Any, ...]]


class _SqliteStatements:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> _Result:
        return _Result(self._connection.execute(sql, dict(params or {})).fetchall())


class SqliteLog:
    """The log's own SQLite file, created owner-only on the first write."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._connection is None:
            if not self.path.exists():
                if not create:
                    return None
                private_folder(self.path.parent)
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, check_same_thread=False)
            try:
                prepare(connection, SCHEMA)
            except sqlite3.Error:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    @contextlib.contextmanager
    def transaction(self, *, create: bool = True) -> Iterator[_SqliteStatements | None]:
        with self._lock:
            connection = self._connect(create)
            if connection is None:
                yield None
                return
            with connection:
                yield _SqliteStatements(connection)

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


@dataclass
class QueryCounts:
    """Queries and feedback since the process started (``/metrics`` reads them):
    ``nothing_good`` counts the queries none of whose results reached ``good_score``."""

    queries: int = 0
    nothing_good: int = 0
    helpful: int = 0
    unhelpful: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **moved: int) -> None:
        with self._lock:
            for name, by in moved.items():
                setattr(self, name, getattr(self, name) + by)


def is_good(results: list[LoggedResult], good_score: float) -> bool:
    """Whether any result's best cosine reaches ``good_score``."""
    return any(r.dense is not None and r.dense >= good_score for r in results)


def _iso(at_ns: int) -> str:
    return datetime.fromtimestamp(at_ns / 1e9, UTC).isoformat(timespec="seconds")


class QueryLog:
    """One knowledge base's query log and query counts."""

    def __init__(
        self,
        state_dir: Path,
        settings: Callable[[], QueryLogConfig],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.clock = clock  # seconds since the epoch (a test moves it)
        self.counts = QueryCounts()
        self._own = SqliteLog(state_dir / LOG_FILE)
        self.database: LogDatabase = self._own
        self._pruned_at = float("-inf")
        self._paused = 0
        self._pause_lock = threading.Lock()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Neither log nor count this knowledge base's searches meanwhile (every search
        of this object, whatever thread makes it): an eval run's questions are not what
        people ask, so ``flexmatch eval --kb``, a process of its own, runs inside it."""
        with self._pause_lock:
            self._paused += 1
        try:
            yield
        finally:
            with self._pause_lock:
                self._paused -= 1

    def share(self, database: LogDatabase) -> None:
        """Keep the log in ``database`` (a service's shared state) from now on."""
        self.database = database

    def _now_ns(self) -> int:
        return int(self.clock() * 1e9)

    def _cutoff_ns(self) -> int:
        return self._now_ns() - self.settings().retention_days * DAY_NS

    # -- writing --------------------------------------------------------------------------
    def record_query(self, answer: Answer, *, tenant: str, principal: Principal | None) -> None:
        """Count the query, and log it when the log is on (unless ``paused``)."""
        if self._paused:
            return
        settings = self.settings()
        results = [
            LoggedResult(
                chunk_id=r.chunk_id, document_id=r.document_id, score=r.score, dense=r.signals.dense
            )
            for r in answer.results
        ]
        good = is_good(results, settings.good_score)
        self.counts.add(queries=1, nothing_good=0 if good else 1)
        if not settings.enabled:
            return
        row = {
            "id": uuid.uuid4().hex,
            "at_ns": self._now_ns(),
            "tenant": tenant,
            "principal": principal_name(principal),
            "query": answer.query,
            "results": json.dumps([r.model_dump() for r in results]),
        }
        with self.database.transaction() as db:
            db.execute(
                "INSERT INTO query_log (id, at_ns, tenant, principal, query, results)"
                " VALUES (:id, :at_ns, :tenant, :principal, :query, :results)",
                row,
            )
        self._prune_now_and_then()

    def record_feedback(
        self,
        query: str,
        chunk_id: str,
        helpful: bool,
        *,
        document_id: str,
        tenant: str,
        principal: Principal | None,
    ) -> None:
        """One feedback event: ``principal`` said whether ``chunk_id`` (of
        ``document_id``) answered ``query``. Counted always, logged when the log is on.
        The caller has checked that ``principal`` may read the chunk."""
        self.heard(
            FeedbackEvent(
                at="",
                tenant=tenant,
                principal=principal_name(principal),
                query=query,
                chunk_id=chunk_id,
                document_id=document_id,
                helpful=helpful,
            )
        )

    def heard(self, event: FeedbackEvent) -> None:
        """Keep a feedback event as the knowledge base's feedback produced it (a
        ``KnowledgeBase.on_feedback`` listener): counted always, logged when the log is
        on, with the log's own clock."""
        self.counts.add(helpful=1 if event.helpful else 0, unhelpful=0 if event.helpful else 1)
        if not self.settings().enabled:
            return
        row = {
            "id": uuid.uuid4().hex,
            "at_ns": self._now_ns(),
            "tenant": event.tenant,
            "principal": event.principal,
            "query": event.query,
            "chunk_id": event.chunk_id,
            "document_id": event.document_id,
            "helpful": 1 if event.helpful else 0,
        }
        with self.database.transaction() as db:
            db.execute(
                "INSERT INTO query_feedback"
                " (id, at_ns, tenant, principal, query, chunk_id, document_id, helpful)"
                " VALUES (:id, :at_ns, :tenant, :principal, :query, :chunk_id, :document_id,"
                " :helpful)",
                row,
            )
        self._prune_now_and_then()

    def _prune_now_and_then(self) -> None:
        now = time.monotonic()
        if now - self._pruned_at >= PRUNE_EVERY:
            self._pruned_at = now
            self.prune()

    def prune(self) -> None:
        """Delete the entries and feedback older than ``retention_days``."""
        cutoff = {"cutoff": self._cutoff_ns()}
        with self.database.transaction(create=False) as db:
            if db is None:
                return
            db.execute("DELETE FROM query_log WHERE at_ns < :cutoff", cutoff)
            db.execute("DELETE FROM query_feedback WHERE at_ns < :cutoff", cutoff)

    # -- reading --------------------------------------------------------------------------
    def entries(
        self,
        tenant: str,
        readable: Callable[[str], bool] | None = None,
        *,
        limit: int | None = None,
    ) -> list[LogEntry]:
        """``tenant``'s logged queries, newest first; each keeps only the results on
        documents ``readable`` allows (None: all), and says whether one of those is good."""
        self.prune()
        good_score = self.settings().good_score
        sql = (
            "SELECT at_ns, tenant, principal, query, results FROM query_log"
            " WHERE tenant = :tenant AND at_ns >= :cutoff ORDER BY at_ns DESC, id"
        )
        params: dict[str, Any] = {"tenant": tenant, "cutoff": self._cutoff_ns()}
        if limit is not None:
            sql += " LIMIT :limit"
            params["limit"] = limit
        with self.database.transaction(create=False) as db:
            rows = [] if db is None else db.execute(sql, params).rows
        found = []
        for at_ns, row_tenant, principal, query, results in rows:
            kept = [
                LoggedResult.model_validate(r)
                for r in json.loads(results)
                if readable is None or readable(r["document_id"])
            ]
            found.append(
                LogEntry(
                    at=_iso(int(at_ns)),
                    tenant=row_tenant,
                    principal=principal,
                    query=query,
                    results=kept,
                    good=is_good(kept, good_score),
                )
            )
        return found

    def feedback(
        self, tenant: str, readable: Callable[[str], bool] | None = None
    ) -> list[FeedbackEvent]:
        """``tenant``'s feedback events on documents ``readable`` allows, newest first."""
        self.prune()
        with self.database.transaction(create=False) as db:
            rows = (
                []
                if db is None
                else db.execute(
                    "SELECT at_ns, tenant, principal, query, chunk_id, document_id, helpful"
                    " FROM query_feedback WHERE tenant = :tenant AND at_ns >= :cutoff"
                    " ORDER BY at_ns DESC, id",
                    {"tenant": tenant, "cutoff": self._cutoff_ns()},
                ).rows
            )
        return [
            FeedbackEvent(
                at=_iso(int(at_ns)),
                tenant=row_tenant,
                principal=principal,
                query=query,
                chunk_id=chunk_id,
                document_id=document_id,
                helpful=bool(helpful),
            )
            for at_ns, row_tenant, principal, query, chunk_id, document_id, helpful in rows
            if readable is None or readable(document_id)
        ]

    def close(self) -> None:
        self._own.close()
