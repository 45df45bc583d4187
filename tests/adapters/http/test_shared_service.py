"""The service's shared state inside one process: cache generations another replica bumps,
job records that beat while their job runs, and a job whose server died."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

from flexmatch import DocumentOutcome, IngestReport
from flexmatch.adapters.http.cache import SearchCache
from flexmatch.adapters.http.jobs import JobRegistry, write_item
from flexmatch.adapters.http.writes import TenantWriter
from flexmatch.service import JobRecord, SharedState


def test_a_write_through_one_replica_hides_the_others_cached_answers(tmp_path: Path) -> None:
    a_state, b_state = SharedState.for_kb(tmp_path), SharedState.for_kb(tmp_path)
    a = SearchCache(generations=a_state.generations)
    b = SearchCache(generations=b_state.generations)
    key = a.key("acme", "where is the key?")
    a.put(key, "answer")
    a.put(a.key("other", "q"), "theirs")
    assert a.get(a.key("acme", "where is the key?")) == "answer"
    b.invalidate("acme")  # replica B wrote to tenant acme
    fresh = a.key("acme", "where is the key?")
    assert fresh != key and a.get(fresh) is None and a.get(key) is None
    assert a.get(a.key("other", "q")) == "theirs"  # another tenant keeps its answers
    a.put(key, "stale")  # computed before B's write: never stored
    assert a.get(key) is None


def _registry(state: SharedState, clock: list[int] | None = None, **options: Any) -> JobRegistry:
    """A replica's job registry; ``clock`` (nanoseconds, in a list) stands still unless
    the test moves it."""

    async def ready() -> None:
        return None

    return JobRegistry(
        kb=cast(Any, None),  # the jobs below write through their own function
        writer=TenantWriter(),
        ready=ready,
        shared=state,
        clock=time.time_ns if clock is None else (lambda: clock[0]),
        **options,
    )


def test_a_running_job_beats_and_a_shutdown_is_recorded(tmp_path: Path) -> None:
    poller = _registry(SharedState.for_kb(tmp_path))  # another replica

    async def scenario() -> None:
        runner = _registry(SharedState.for_kb(tmp_path), heartbeat=0.05)
        release = asyncio.Event()

        async def write(tenant: str, progress: Any) -> IngestReport:
            progress(IngestReport(planned=3, processed=1))
            await release.wait()
            return IngestReport(outcomes=[DocumentOutcome(input="a.md", outcome="added")])

        first = await runner.submit("acme", "reindex", [write_item("re-index", write)], total=0)
        seen = poller.get("acme", first.id)
        assert seen is not None and seen.status in ("queued", "running")
        beats: set[int] = set()
        for _ in range(100):
            await asyncio.sleep(0.02)
            record = poller.records.get("acme", first.id)
            assert record is not None
            beats.add(record.heartbeat_ns)
            if len(beats) >= 3 and record.body["processed"] == 1:
                break
        assert len(beats) >= 3  # it beats while it waits
        polled = poller.get("acme", first.id)
        assert polled is not None and polled.status == "running" and polled.total == 3
        release.set()
        for _ in range(100):
            done = poller.get("acme", first.id)
            if done is not None and done.status == "done":
                break
            await asyncio.sleep(0.02)
        assert done is not None and done.status == "done"
        assert [d.input for d in done.documents] == ["a.md"] and done.counts.added == 1
        stuck = asyncio.Event()

        async def never(tenant: str, progress: Any) -> IngestReport:
            await stuck.wait()
            return IngestReport()

        second = await runner.submit("acme", "reindex", [write_item("re-index", never)], total=0)
        await asyncio.sleep(0.05)
        await runner.close()  # the server stops
        stopped = poller.get("acme", second.id)
        assert stopped is not None and stopped.status == "failed"
        assert stopped.error == "the server shut down before the job finished"

    asyncio.run(scenario())


def test_a_job_whose_server_died_is_marked_failed_by_the_next_reader(tmp_path: Path) -> None:
    state = SharedState.for_kb(tmp_path)
    body = {
        "kind": "upload",
        "total": 2,
        "processed": 1,
        "created_at": "2025-01-01T00:00:00+00:00",
    }
    second = 1_000_000_000
    state.jobs.create(JobRecord("j1", "acme", "running", 0, 100 * second, body))
    clock = [130 * second]  # 30 s of silence: still within lost_after
    reader = _registry(state, clock, lost_after=60.0)
    alive = reader.get("acme", "j1")
    assert alive is not None and alive.status == "running"
    assert alive.updated_at == "1970-01-01T00:01:40+00:00"
    clock[0] = 161 * second  # 61 s: its server is gone
    lost = reader.get("acme", "j1")
    assert lost is not None and lost.status == "failed" and lost.finished_at
    assert "stopped (no sign of life since 1970-01-01T00:01:40+00:00)" in (lost.error or "")
    record = state.jobs.get("acme", "j1")
    assert record is not None and record.status == "failed"  # recorded, for every replica
    assert reader.list("acme")[0].status == "failed"


def test_a_job_goes_on_when_saving_its_progress_fails_once(tmp_path: Path) -> None:
    """The state database blinks between two documents: the job writes every document,
    and its record catches up at the next save."""
    from flexmatch.errors import StoreError

    state = SharedState.for_kb(tmp_path)
    real_save = state.jobs.save
    calls = [0]

    def flaky_save(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:  # the save after the first document
            raise StoreError("the service state database failed: database is locked")
        return real_save(*args, **kwargs)

    state.jobs.save = flaky_save  # type: ignore[method-assign]
    written: list[str] = []

    def item(name: str) -> Any:
        async def write(tenant: str, progress: Any) -> IngestReport:
            written.append(name)
            return IngestReport(outcomes=[DocumentOutcome(input=name, outcome="added")])

        return write_item(name, write)

    async def scenario() -> Any:
        registry = _registry(state)
        job = await registry.submit("acme", "reindex", [item(n) for n in "abc"], total=3)
        for _ in range(500):
            await asyncio.sleep(0.01)
            seen = registry.get("acme", job.id)
            if seen is not None and seen.status not in ("queued", "running"):
                return seen
        raise AssertionError("the job did not finish")

    finished = asyncio.run(scenario())
    assert written == ["a", "b", "c"]
    assert finished.status == "done" and finished.error is None
    assert [d.input for d in finished.documents] == ["a", "b", "c"]
