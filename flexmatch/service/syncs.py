"""Source syncs a service runs: one at a time per source and tenant across all replicas,
and each one's last run, in the shared state database.

A replica about to sync a source takes its lease (table ``sync_leases``): one statement
that updates the row when its lease has expired, else an insert that fails when the row
exists, in one transaction, so of two replicas asking at once exactly one gets it. The
holder renews it while the sync runs and deletes it at the end; a replica that dies
mid-run stops renewing, the lease expires, and another replica may run the sync later.
The last run (table ``sync_runs``) says when it started and ended, how it went, what it
stored and what it cost, for ``GET /v1/sources`` and the console.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from flexmatch.models import Usage
from flexmatch.service.state_db import Database

# done/failed/skipped: the source's sync outcome; interrupted: the service stopped first
RunOutcome = Literal["running", "done", "failed", "skipped", "interrupted"]


class SyncRun(BaseModel):
    """A source's last sync for a tenant."""

    source: str
    tenant: str
    job_id: str | None = None
    trigger: Literal["schedule", "request"] = "schedule"
    started_at: str
    finished_at: str | None = None
    outcome: RunOutcome = "running"
    reason: str | None = None
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0
    usage: Usage = Field(default_factory=Usage, description="LLM calls, tokens and cost.")


class SyncLease(BaseModel):
    """Who runs a source's sync for a tenant now (a replica), as which job, until when."""

    source: str
    tenant: str
    holder: str
    job_id: str
    expires_ns: int


class SyncState:
    """Sync leases and last runs, in the shared state database."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def take(self, source: str, tenant: str, holder: str, expires_ns: int, now_ns: int) -> bool:
        """The lease, if nobody holds it or its holder's has expired (``now_ns``)."""
        key = {"source": source, "tenant": tenant}
        taken = {**key, "holder": holder, "job_id": "", "expires": expires_ns}
        with self.database.transaction() as db:
            changed = db.execute(
                "UPDATE sync_leases SET holder = :holder, job_id = :job_id,"
                " expires_ns = :expires"
                " WHERE source = :source AND tenant = :tenant AND expires_ns < :now",
                {**taken, "now": now_ns},
            ).rowcount
            if changed:
                return True
            return db.insert(
                "INSERT INTO sync_leases (source, tenant, holder, job_id, expires_ns)"
                " VALUES (:source, :tenant, :holder, :job_id, :expires)",
                taken,
            )

    def renew(
        self, source: str, tenant: str, holder: str, expires_ns: int, job_id: str | None = None
    ) -> bool:
        """Push the lease's end to ``expires_ns`` (and name its job); False when
        ``holder`` no longer holds it (it expired and another replica took it)."""
        with self.database.transaction() as db:
            return (
                db.execute(
                    "UPDATE sync_leases SET expires_ns = :expires,"
                    " job_id = COALESCE(:job_id, job_id)"
                    " WHERE source = :source AND tenant = :tenant AND holder = :holder",
                    {
                        "source": source,
                        "tenant": tenant,
                        "holder": holder,
                        "expires": expires_ns,
                        "job_id": job_id,
                    },
                ).rowcount
                > 0
            )

    def release(self, source: str, tenant: str, holder: str) -> None:
        with self.database.transaction() as db:
            db.execute(
                "DELETE FROM sync_leases"
                " WHERE source = :source AND tenant = :tenant AND holder = :holder",
                {"source": source, "tenant": tenant, "holder": holder},
            )

    def leases(self, tenant: str, now_ns: int) -> dict[str, SyncLease]:
        """The tenant's leases not yet expired, by source."""
        with self.database.transaction(create=False) as db:
            if db is None:
                return {}
            rows = db.execute(
                "SELECT source, tenant, holder, job_id, expires_ns FROM sync_leases"
                " WHERE tenant = :tenant AND expires_ns >= :now",
                {"tenant": tenant, "now": now_ns},
            ).rows
        return {
            row[0]: SyncLease(
                source=row[0], tenant=row[1], holder=row[2], job_id=row[3], expires_ns=row[4]
            )
            for row in rows
        }

    def record(self, run: SyncRun, started_ns: int, holder: str | None = None) -> None:
        """Save ``run`` as the source's last run for its tenant; with ``holder``, release
        its lease in the same transaction (no reader sees the run ended and the lease held,
        or the lease gone and the run not ended)."""
        values = {
            "source": run.source,
            "tenant": run.tenant,
            "started": started_ns,
            "body": run.model_dump_json(),
        }
        update = (
            "UPDATE sync_runs SET started_ns = :started, body = :body"
            " WHERE source = :source AND tenant = :tenant"
        )
        with self.database.transaction() as db:
            if not db.execute(update, values).rowcount and not db.insert(
                "INSERT INTO sync_runs (source, tenant, started_ns, body)"
                " VALUES (:source, :tenant, :started, :body)",
                values,
            ):
                db.execute(update, values)  # another replica added the row meanwhile
            if holder is not None:
                db.execute(
                    "DELETE FROM sync_leases"
                    " WHERE source = :source AND tenant = :tenant AND holder = :holder",
                    {"source": run.source, "tenant": run.tenant, "holder": holder},
                )

    def runs(self, tenant: str) -> dict[str, tuple[int, SyncRun]]:
        """The tenant's last run of each source, with when it started (ns)."""
        with self.database.transaction(create=False) as db:
            if db is None:
                return {}
            rows = db.execute(
                "SELECT source, started_ns, body FROM sync_runs WHERE tenant = :tenant",
                {"tenant": tenant},
            ).rows
        return {row[0]: (int(row[1]), SyncRun.model_validate(json.loads(row[2]))) for row in rows}
