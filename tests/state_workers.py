"""Work other processes do on a shared state database, for the tests of several replicas:
writers racing each other (importable by a spawned process: no test fixtures here), and a
replica that runs a job until it is killed (``python -m tests.state_workers job ...``)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path
from typing import Any, cast

from flexmatch import DocumentOutcome, IngestReport
from flexmatch.service import JobRecord, SharedState
from flexmatch.service.state_db import open_database

SHARED_JOB = "shared-job"


def open_state(kb_dir: str, url: str | None) -> SharedState:
    return SharedState(open_database(Path(kb_dir), url))


def write_concurrently(kb_dir: str, url: str | None, worker: int, threads: int, each: int) -> None:
    """``threads`` threads of one process, each making ``each`` keys, cache-generation bumps,
    outcomes of the job every writer shares, and saves of a job of its own."""
    state = open_state(kb_dir, url)
    errors: list[BaseException] = []

    def run(thread: int) -> None:
        try:
            own = f"w{worker}t{thread}"
            state.jobs.create(JobRecord(own, "acme", "running", 1, 1, {"n": 0}))
            for i in range(each):
                state.keys.create("acme", "read", f"{own}-{i}")
                state.generations.bump("acme")
                position = (worker * 100 + thread) * 1_000 + i
                saved = state.jobs.save(
                    SHARED_JOB, "running", {"by": own}, time.time_ns(), [(position, {"i": i})]
                )
                assert saved, "the shared job was not live"
                assert state.jobs.save(own, "running", {"n": i + 1}, time.time_ns())
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    state.close()
    if errors:
        raise errors[0]


def run_job_until_killed(kb_dir: str, url: str | None) -> None:
    """A replica that accepts a job, finishes its first document and hangs on the second,
    beating every 0.1 s; it prints the job id and waits to be killed."""
    from flexmatch.adapters.http.jobs import JobRegistry, write_item
    from flexmatch.adapters.http.writes import TenantWriter

    async def ready() -> None:
        return None

    def item(name: str, hang: bool) -> Any:
        async def write(tenant: str, progress: Any) -> IngestReport:
            if hang:
                await asyncio.Event().wait()
            return IngestReport(outcomes=[DocumentOutcome(input=name, outcome="added")])

        return write_item(name, write)

    async def main() -> None:
        registry = JobRegistry(
            kb=cast(Any, None),  # the items write through their own function
            writer=TenantWriter(),
            ready=ready,
            shared=open_state(kb_dir, url),
            heartbeat=0.1,
        )
        items = [item("first.md", False), item("second.md", True)]
        job = await registry.submit("acme", "upload", items)
        print(job.id, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


if __name__ == "__main__":
    command, kb, state_url = sys.argv[1:4]
    assert command == "job", command
    run_job_until_killed(kb, state_url or None)


def create_tables_at(kb_dir: str, url: str | None, at: float, threads: int = 1) -> None:
    """Reach the database and create its tables at wall-clock time ``at`` from ``threads``
    threads (replicas starting together race to create them), each then making a key."""
    state = open_state(kb_dir, url)
    errors: list[BaseException] = []

    def start() -> None:
        try:
            time.sleep(max(0.0, at - time.time()))
            state.check()
            state.keys.create("acme", "read")
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=start) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    state.close()
    if errors:
        raise errors[0]
