"""What every replica of a service must see alike, in one state database.

- API keys (``KeyStore``): read on every request, so a revocation holds everywhere at once.
- Job records: a job runs in the replica that accepted it, which writes its progress and
  per-document outcomes here, so any replica answers ``GET /v1/jobs/{id}``. The running
  replica also writes a heartbeat; a live job whose heartbeat stopped (its replica died)
  is declared failed by the first replica that reads it afterwards.
- Cache generations: a counter per tenant that every write bumps; a replica's cached
  search answers are keyed on it, so a write through any replica makes them unreachable.
- Sync leases and last runs (``SyncState``): one sync of a source at a time, everywhere.

The database is ``<kb>/.flexmatch/keys.sqlite`` by default, or ``service.state_url``
(see ``flexmatch.service.state_db``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flexmatch.config import KBConfig, load_config
from flexmatch.service.keys import KeyStore
from flexmatch.service.state_db import Database, open_database
from flexmatch.service.syncs import SyncState

LIVE = ("queued", "running")  # a job in one of these is still someone's to finish


@dataclass
class JobRecord:
    """A stored job: its own columns, the rest of it as JSON, its document outcomes."""

    id: str
    tenant: str
    status: str
    created_ns: int
    heartbeat_ns: int
    body: dict[str, Any]
    documents: list[dict[str, Any]] = field(default_factory=list)


_JOB_COLUMNS = "id, tenant, status, created_ns, heartbeat_ns, body"


class JobRecords:
    """Jobs by id, scoped to a tenant on every read."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def create(self, record: JobRecord) -> None:
        with self.database.transaction() as db:
            db.execute(
                f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES "
                "(:id, :tenant, :status, :created_ns, :heartbeat_ns, :body)",
                {
                    "id": record.id,
                    "tenant": record.tenant,
                    "status": record.status,
                    "created_ns": record.created_ns,
                    "heartbeat_ns": record.heartbeat_ns,
                    "body": json.dumps(record.body),
                },
            )

    def save(
        self,
        job_id: str,
        status: str,
        body: dict[str, Any],
        heartbeat_ns: int,
        new_documents: list[tuple[int, dict[str, Any]]] | None = None,
    ) -> bool:
        """Record a live job's progress (and its new outcomes, by position); False when it
        is no longer live here: another replica declared it lost."""
        with self.database.transaction() as db:
            changed = db.execute(
                "UPDATE jobs SET status = :status, body = :body, heartbeat_ns = :beat"
                " WHERE id = :id AND status IN (:queued, :running)",
                {
                    "status": status,
                    "body": json.dumps(body),
                    "beat": heartbeat_ns,
                    "id": job_id,
                    "queued": LIVE[0],
                    "running": LIVE[1],
                },
            ).rowcount
            if not changed:
                return False
            for position, outcome in new_documents or []:
                db.insert(
                    "INSERT INTO job_documents (job_id, position, outcome)"
                    " VALUES (:job_id, :position, :outcome)",
                    {"job_id": job_id, "position": position, "outcome": json.dumps(outcome)},
                )
        return True

    def declare_lost(self, record: JobRecord, body: dict[str, Any]) -> bool:
        """Mark a live job failed, unless its heartbeat moved since ``record`` was read."""
        with self.database.transaction() as db:
            return (
                db.execute(
                    "UPDATE jobs SET status = :failed, body = :body"
                    " WHERE id = :id AND heartbeat_ns = :beat AND status IN (:queued, :running)",
                    {
                        "failed": "failed",
                        "body": json.dumps(body),
                        "id": record.id,
                        "beat": record.heartbeat_ns,
                        "queued": LIVE[0],
                        "running": LIVE[1],
                    },
                ).rowcount
                > 0
            )

    def get(self, tenant: str, job_id: str) -> JobRecord | None:
        with self.database.transaction(create=False) as db:
            if db is None:
                return None
            rows = db.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = :id AND tenant = :tenant",
                {"id": job_id, "tenant": tenant},
            ).rows
            if not rows:
                return None
            record = _record(rows[0])
            outcomes = db.execute(
                "SELECT outcome FROM job_documents WHERE job_id = :id ORDER BY position",
                {"id": job_id},
            ).rows
        record.documents = [json.loads(row[0]) for row in outcomes]
        return record

    def list(self, tenant: str, limit: int) -> list[JobRecord]:
        """The tenant's jobs, newest first, with their outcomes."""
        with self.database.transaction(create=False) as db:
            if db is None:
                return []
            rows = db.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE tenant = :tenant"
                " ORDER BY created_ns DESC, id LIMIT :limit",
                {"tenant": tenant, "limit": limit},
            ).rows
            records = [_record(row) for row in rows]
            outcomes = db.execute(
                "SELECT d.job_id, d.outcome FROM job_documents d JOIN jobs j ON j.id = d.job_id"
                " WHERE j.tenant = :tenant ORDER BY d.job_id, d.position",
                {"tenant": tenant},
            ).rows
        by_id = {record.id: record for record in records}
        for job_id, outcome in outcomes:
            if job_id in by_id:
                by_id[job_id].documents.append(json.loads(outcome))
        return records

    def prune(self, keep: int) -> int:
        """Forget the oldest finished jobs beyond ``keep`` jobs in all; live ones stay."""
        with self.database.transaction() as db:
            total = db.execute("SELECT COUNT(*) FROM jobs").rows[0][0]
            if total <= keep:
                return 0
            old = db.execute(
                "SELECT id FROM jobs WHERE status NOT IN (:queued, :running)"
                " ORDER BY created_ns, id LIMIT :excess",
                {"queued": LIVE[0], "running": LIVE[1], "excess": total - keep},
            ).rows
            for (job_id,) in old:
                db.execute("DELETE FROM job_documents WHERE job_id = :id", {"id": job_id})
                db.execute("DELETE FROM jobs WHERE id = :id", {"id": job_id})
        return len(old)


def _record(row: tuple[Any, ...]) -> JobRecord:
    job_id, tenant, status, created_ns, heartbeat_ns, body = row
    return JobRecord(
        id=job_id,
        tenant=tenant,
        status=status,
        created_ns=int(created_ns),
        heartbeat_ns=int(heartbeat_ns),
        body=json.loads(body),
    )


class Generations:
    """A counter per tenant, bumped by every write to it; cached answers are keyed on it."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def current(self, tenant: str) -> int:
        with self.database.transaction(create=False) as db:
            if db is None:
                return 0
            rows = db.execute(
                "SELECT generation FROM cache_generations WHERE tenant = :tenant",
                {"tenant": tenant},
            ).rows
        return int(rows[0][0]) if rows else 0

    def bump(self, tenant: str) -> None:
        """One ``UPDATE … SET generation = generation + 1``; the tenant's first write adds
        its row (a replica that loses that race updates the row the winner added)."""
        bump = "UPDATE cache_generations SET generation = generation + 1 WHERE tenant = :tenant"
        with self.database.transaction() as db:
            if db.execute(bump, {"tenant": tenant}).rowcount:
                return
            added = db.insert(
                "INSERT INTO cache_generations (tenant, generation) VALUES (:tenant, 1)",
                {"tenant": tenant},
            )
            if not added:
                db.execute(bump, {"tenant": tenant})


class SharedState:
    """The keys, job records, cache generations and syncs of a service, in one database."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.keys = KeyStore(database)
        self.jobs = JobRecords(database)
        self.generations = Generations(database)
        self.syncs = SyncState(database)

    @classmethod
    def for_kb(cls, kb_dir: str | Path, config: KBConfig | None = None) -> SharedState:
        """``kb_dir``'s state: at ``service.state_url`` when set, else in its folder."""
        folder = Path(kb_dir).expanduser().resolve()
        url = (config or load_config(folder)).service.state_url
        return cls(open_database(folder, url))

    @property
    def location(self) -> str:
        return self.database.location

    def check(self) -> None:
        """Reach the database and create its tables (a server fails fast on a bad URL)."""
        self.database.check()

    def ping(self) -> None:
        """Read from the database, creating nothing; ``StoreError`` when it is down."""
        self.database.ping()

    def close(self) -> None:
        self.database.close()
