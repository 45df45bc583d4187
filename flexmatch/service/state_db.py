"""The SQL database a service's replicas share: API keys, job records, cache generations,
sync leases and each source's last sync.

By default it is ``<kb>/.flexmatch/keys.sqlite`` through the standard library's sqlite3
(no extra needed, and the file API keys have always lived in, so existing keys keep
working); every process on this machine can share it. ``service.state_url`` names any
database SQLAlchemy reaches instead (PostgreSQL for replicas on several machines), which
needs the ``shared`` extra; ``postgresql://`` without a driver means psycopg 3, the driver
that extra installs.

A server that is down or restarting costs a request at most ``CONNECT_TIMEOUT`` seconds
and fails it with a ``StoreError`` naming the database (a 503 over HTTP), never a hang;
pooled connections are pinged before use, so the first request after a restart works.

The statements are written once, in plain SQL with ``:name`` parameters that both
drivers take; only the tables are declared twice (SQLite DDL here, SQLAlchemy ``Table``
objects for the other databases, which pick the right types for each dialect). Nothing
is cached in a process: each call reads what is committed, so a key revoked through one
replica is refused by every other on its next request.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from flexmatch.engine.folders import private_folder
from flexmatch.engine.sqlite_wal import BUSY_TIMEOUT, prepare
from flexmatch.errors import ConfigError, StoreError
from flexmatch.extras import require

STATE_FILE = Path(".flexmatch") / "keys.sqlite"  # its old name: it held only the keys once
CONNECT_TIMEOUT = 5  # seconds to reach a database server (libpq takes whole seconds)
POOL_TIMEOUT = 10.0  # seconds a thread waits for a free pooled connection
_SCHEMA_LOCK = 0x666C65786D61  # PostgreSQL advisory lock held while creating the tables

_SQLITE_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS api_keys (
        id TEXT PRIMARY KEY,
        secret_sha256 TEXT NOT NULL,
        tenant TEXT NOT NULL,
        permissions TEXT NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        revoked INTEGER NOT NULL DEFAULT 0,
        revoked_at TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS jobs (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        status TEXT NOT NULL,
        created_ns INTEGER NOT NULL,
        heartbeat_ns INTEGER NOT NULL,
        body TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS jobs_by_tenant ON jobs (tenant, created_ns)",
    """CREATE TABLE IF NOT EXISTS job_documents (
        job_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        PRIMARY KEY (job_id, position)
    )""",
    """CREATE TABLE IF NOT EXISTS cache_generations (
        tenant TEXT PRIMARY KEY,
        generation INTEGER NOT NULL
    )""",
    # who a key reads as (flexmatch.service.keys.KeyIdentity, JSON); a key without a row is unbound
    """CREATE TABLE IF NOT EXISTS key_identities (
        key_id TEXT PRIMARY KEY,
        identity TEXT NOT NULL
    )""",
    # who runs a source's sync for a tenant now, until when (flexmatch.service.syncs)
    """CREATE TABLE IF NOT EXISTS sync_leases (
        source TEXT NOT NULL,
        tenant TEXT NOT NULL,
        holder TEXT NOT NULL,
        job_id TEXT NOT NULL,
        expires_ns INTEGER NOT NULL,
        PRIMARY KEY (source, tenant)
    )""",
    # a source's last sync for a tenant (its body: outcome, counts, cost, as JSON)
    """CREATE TABLE IF NOT EXISTS sync_runs (
        source TEXT NOT NULL,
        tenant TEXT NOT NULL,
        started_ns INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (source, tenant)
    )""",
)


@dataclass
class Result:
    rows: list[tuple[Any, ...]]
    rowcount: int


class Transaction(Protocol):
    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> Result:
        """Run one statement; its rows (if it returns any) and the rows it changed."""

    def insert(self, sql: str, params: Mapping[str, Any]) -> bool:
        """Run an INSERT; False (and nothing changed) when its key is already taken."""


class Database(Protocol):
    """One database, used one short transaction at a time."""

    location: str  # for messages: the file, or the URL without its password
    path: Path | None  # the SQLite file, when it is one
    insertion_order: str  # the column that orders rows as they were inserted

    def transaction(self, *, create: bool = True) -> contextlib.AbstractContextManager[Any]:
        """A transaction, committed when the block ends (rolled back if it raises); with
        ``create=False`` it may yield None: there is no database yet, so nothing in it."""

    def check(self) -> None:
        """Reach the database and create its tables now (a server fails fast on a bad URL)."""

    def ping(self) -> None:
        """Read from the database, creating nothing; a ``StoreError`` when it does not
        answer (readiness: a replica whose state database is down is not ready)."""

    def close(self) -> None: ...


def _failed(location: str, exc: BaseException) -> StoreError:
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    detail = lines[0] if lines else repr(exc)  # the driver's first line says what happened
    return StoreError(f"the service state database ({location}) failed: {detail}")


# -- SQLite through the standard library (the default) --------------------------------
class _SqliteTransaction:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> Result:
        cursor = self._connection.execute(sql, dict(params or {}))
        return Result(cursor.fetchall(), cursor.rowcount)

    def insert(self, sql: str, params: Mapping[str, Any]) -> bool:
        try:
            self._connection.execute(sql, dict(params))
        except sqlite3.IntegrityError:
            return False  # SQLite undoes the statement, not the transaction
        return True


class SqliteDatabase:
    """A SQLite file, created owner-only on the first write. Each thread keeps its own
    connection (a reader never waits for another thread's write: the file is in WAL
    mode), and each statement reads what is committed."""

    insertion_order = "rowid"

    def __init__(self, path: Path) -> None:
        self.path: Path | None = path
        self.location = str(path)
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._prepared: int | None = None  # the inode of the file set up in WAL mode

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        path = self.path
        assert path is not None
        try:
            inode = path.stat().st_ino
        except FileNotFoundError:
            if not create:
                return None
            private_folder(path.parent)  # .flexmatch: 700, as it holds every tenant's data
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)  # owner-only from the start
            os.close(fd)
            inode = path.stat().st_ino
            with self._lock:  # a new file, whatever its inode number (one may be reused)
                self._prepared = None
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == inode:
            return held[1]
        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False)
        try:
            with self._lock:  # one thread of this process sets the file up at a time
                if self._prepared != inode:
                    prepare(connection, _SQLITE_SCHEMA)
                    self._prepared = inode
        except sqlite3.Error:
            connection.close()
            raise
        if held is not None:  # the file was replaced under us: start afresh
            held[1].close()
        self._local.held = (inode, connection)
        with self._lock:
            self._opened.append(connection)
        return connection

    @contextlib.contextmanager
    def transaction(self, *, create: bool = True) -> Iterator[_SqliteTransaction | None]:
        try:
            connection = self._connect(create)
            if connection is None:
                yield None
                return
            with connection:
                yield _SqliteTransaction(connection)
        except sqlite3.Error as exc:
            raise _failed(self.location, exc) from exc

    def check(self) -> None:
        with self.transaction():
            pass

    def ping(self) -> None:
        with self.transaction(create=False) as db:
            if db is not None:  # no file yet: nothing to read, and the first write makes it
                db.execute("SELECT COUNT(*) FROM sqlite_master")

    def close(self) -> None:
        """Close every thread's connection (the object still works: it reconnects)."""
        with self._lock:
            opened, self._opened = self._opened, []
            self._prepared = None  # the file may be replaced before the next use
        for connection in opened:
            connection.close()
        self._local = threading.local()


# -- any database through SQLAlchemy (service.state_url) -------------------------------
def _tables(sa: Any) -> Any:
    """The same tables, typed for any dialect (bounded strings where a key needs them)."""
    metadata = sa.MetaData()
    big = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite: rowid aliases
    sa.Table(
        "api_keys",
        metadata,
        sa.Column("seq", big, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=False, unique=True),
        sa.Column("secret_sha256", sa.String(64), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False, index=True),
        sa.Column("permissions", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False, server_default=""),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("revoked", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("revoked_at", sa.String(40)),
    )
    sa.Table(
        "jobs",
        metadata,
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_ns", sa.BigInteger(), nullable=False),
        sa.Column("heartbeat_ns", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Index("jobs_by_tenant", "tenant", "created_ns"),
    )
    sa.Table(
        "job_documents",
        metadata,
        sa.Column("job_id", sa.String(32), primary_key=True),
        sa.Column("position", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("outcome", sa.Text(), nullable=False),
    )
    sa.Table(
        "cache_generations",
        metadata,
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("generation", sa.BigInteger(), nullable=False),
    )
    sa.Table(
        "key_identities",
        metadata,
        sa.Column("key_id", sa.String(32), primary_key=True),
        sa.Column("identity", sa.Text(), nullable=False),
    )
    sa.Table(
        "sync_leases",
        metadata,
        sa.Column("source", sa.String(200), primary_key=True),
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("job_id", sa.String(32), nullable=False),
        sa.Column("expires_ns", sa.BigInteger(), nullable=False),
    )
    sa.Table(
        "sync_runs",
        metadata,
        sa.Column("source", sa.String(200), primary_key=True),
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("started_ns", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
    )
    # the query log of replicas that share this database (flexmatch.engine.query.log,
    # which declares the same tables for its own SQLite file)
    sa.Table(
        "query_log",
        metadata,
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("at_ns", sa.BigInteger(), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("results", sa.Text(), nullable=False),
        sa.Index("query_log_by_tenant", "tenant", "at_ns"),
    )
    sa.Table(
        "query_feedback",
        metadata,
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("at_ns", sa.BigInteger(), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("chunk_id", sa.Text(), nullable=False),
        sa.Column("document_id", sa.Text(), nullable=False),
        sa.Column("helpful", sa.Integer(), nullable=False),
        sa.Index("query_feedback_by_tenant", "tenant", "at_ns"),
    )
    return metadata


class _SqlAlchemyTransaction:
    def __init__(self, sa: Any, connection: Any) -> None:
        self._sa = sa
        self._connection = connection

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> Result:
        result = self._connection.execute(self._sa.text(sql), dict(params or {}))
        rows = [tuple(row) for row in result.fetchall()] if result.returns_rows else []
        return Result(rows, result.rowcount)

    def insert(self, sql: str, params: Mapping[str, Any]) -> bool:
        try:
            with self._connection.begin_nested():  # PostgreSQL aborts a transaction on error
                self._connection.execute(self._sa.text(sql), dict(params))
        except self._sa.exc.IntegrityError:
            return False
        return True


class SqlAlchemyDatabase:
    """A database by SQLAlchemy URL, with a connection pool; tables created on first use."""

    path: Path | None = None

    def __init__(self, url: str) -> None:
        sa = require("sqlalchemy", "shared", "service.state_url (state shared by replicas)")
        self._sa = sa
        try:
            parsed = sa.make_url(url)
        except sa.exc.ArgumentError as exc:
            raise ConfigError(f"service.state_url is not a database URL: {exc}") from exc
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")  # the `shared` extra's driver
        self.location = parsed.render_as_string(hide_password=True)
        sqlite = parsed.get_backend_name() == "sqlite"
        if sqlite and parsed.database in (None, "", ":memory:"):
            raise ConfigError(
                f"service.state_url {self.location} is an in-memory database, which no other "
                "process can see: name a file (sqlite:////path/state.db) or a server"
            )
        self.insertion_order = "rowid" if sqlite else "seq"
        options: dict[str, Any] = {}
        if sqlite:
            options["connect_args"] = {"timeout": BUSY_TIMEOUT}
        else:
            # a server that restarted dropped the pooled connections: ping before use
            options |= {"pool_pre_ping": True, "pool_timeout": POOL_TIMEOUT}
            if parsed.get_backend_name() == "postgresql":
                options["connect_args"] = {"connect_timeout": CONNECT_TIMEOUT}
        try:
            self._engine = sa.create_engine(parsed, **options)
        except (ImportError, sa.exc.NoSuchModuleError) as exc:
            raise ConfigError(
                f"service.state_url {self.location} needs a database driver that is not "
                f"installed ({exc}); for PostgreSQL: pip install 'psycopg[binary]'"
            ) from exc
        if sqlite:
            sa.event.listen(self._engine, "connect", _sqlite_wal)
        self._metadata = _tables(sa)
        self._ready = False
        self._lock = threading.Lock()

    def _create_tables(self) -> None:
        with self._lock:
            if self._ready:
                return
            try:
                self._create_all()
            except self._sa.exc.SQLAlchemyError:
                # another replica created them between our check and our CREATE
                self._create_all()
            self._ready = True

    def _create_all(self) -> None:
        """Create the missing tables; on PostgreSQL one replica at a time (replicas that
        start together would otherwise collide in its catalog), as its DDL is transactional."""
        with self._engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                lock = self._sa.text("SELECT pg_advisory_xact_lock(:key)")
                connection.execute(lock, {"key": _SCHEMA_LOCK})
            self._metadata.create_all(connection)

    @contextlib.contextmanager
    def transaction(self, *, create: bool = True) -> Iterator[_SqlAlchemyTransaction]:
        try:
            self._create_tables()
            with self._engine.begin() as connection:
                yield _SqlAlchemyTransaction(self._sa, connection)
        except self._sa.exc.SQLAlchemyError as exc:
            raise _failed(self.location, exc) from exc

    def check(self) -> None:
        with self.transaction():
            pass

    def ping(self) -> None:
        try:
            with self._engine.connect() as connection:
                connection.execute(self._sa.text("SELECT 1"))
        except self._sa.exc.SQLAlchemyError as exc:
            raise _failed(self.location, exc) from exc

    def close(self) -> None:
        self._engine.dispose()


def _sqlite_wal(connection: Any, _: Any) -> None:
    prepare(connection)


def state_file_for(kb_dir: str | Path) -> Path:
    return Path(kb_dir).expanduser().resolve() / STATE_FILE


def open_database(kb_dir: str | Path, url: str | None = None) -> Database:
    """The database at ``url``, or the SQLite file in the knowledge-base folder."""
    return SqlAlchemyDatabase(url) if url else SqliteDatabase(state_file_for(kb_dir))
