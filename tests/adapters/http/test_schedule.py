"""Scheduled and requested source syncs through the real HTTP surface: ``sync now`` runs a
source's sync as a job and ``GET /v1/sources`` shows its last run; a source with a
schedule syncs when the service starts and again an interval later; two replicas on one
state database never run one source's sync at once (the lease and the job records say
so); a long sync renews its lease, and one whose holder died expires; shutdown (and
SIGTERM to ``flexmatch serve``) marks a running sync interrupted and frees its lease.

Each replica is an app served by uvicorn in a thread over its own knowledge base (an
in-memory vector store) and one shared state database file, as ``test_replicas`` runs
real processes; a web source whose page server holds its answer until the test opens a
gate keeps a sync running for as long as the test needs.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from flexmatch import KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import SharedState
from tests.adapters.http.servers import PageServer, UvicornThread, assert_error, auth
from tests.conftest import write_config

PAGE = "<html><head><title>Tides</title></head><body><p>High tide is at noon.</p></body></html>"
WAIT = 60.0  # seconds a sync may take on a busy 2-core machine


def replica_config(state_url: str, page_url: str, extra: str = "") -> str:
    return f"""\
store:
  url: ':memory:'
service:
  state_url: {state_url}
sources:
  default: {{}}
  notes:
    paths: [notes]
{extra}  tides:
    type: web
    urls: ["{page_url}"]
    allow_hosts: ["127.0.0.1"]
    timeout: 60
"""


@dataclass
class Replica:
    client: httpx.Client
    kb_dir: Path
    shared: SharedState
    admin: str
    holder: str  # its scheduler's name in the leases it takes

    def sources(self) -> dict[str, dict[str, Any]]:
        response = self.client.get("/v1/sources", headers=auth(self.admin))
        assert response.status_code == 200, response.text
        return {s["name"]: s for s in response.json()}

    def sync(self, source: str) -> httpx.Response:
        return self.client.post(f"/v1/sources/{source}/sync", headers=auth(self.admin))

    def sync_jobs(self) -> list[dict[str, Any]]:
        jobs = self.client.get("/v1/jobs", headers=auth(self.admin)).json()
        return [job for job in jobs if job["kind"] == "sync"]


@contextmanager
def replica(
    kb_dir: Path,
    embedder: OnnxEmbedder,
    config: str,
    admin: str | None = None,
    lease_seconds: float | None = None,
    **limits: Any,
) -> Iterator[Replica]:
    """An app over ``kb_dir`` served on loopback; ``admin``: a key made by another
    replica (one of the shared state's), else a new one; ``lease_seconds``: how long its
    leases last unrenewed."""
    write_config(kb_dir, config)
    (kb_dir / "notes").mkdir(exist_ok=True)
    (kb_dir / "notes" / "boats.md").write_text("# Boats\n\nThe red boat leaves at dawn.\n")
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    shared = SharedState.for_kb(kb_dir, kb.config)
    if admin is None:
        _, admin = shared.keys.create("default", "admin", "admin")
    app = create_app(kb, shared=shared, limits=Limits(rate_per_second=1_000, **limits))
    if lease_seconds is not None:
        app.state.service.scheduler.lease_seconds = lease_seconds
    try:
        with UvicornThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as c:
            holder = app.state.service.scheduler.holder
            yield Replica(client=c, kb_dir=kb_dir, shared=shared, admin=admin, holder=holder)
    finally:
        kb.close()
        shared.close()


def wait_for(what: str, check: Callable[[], Any], within: float = WAIT) -> Any:
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.1)


def finished_run(r: Replica, source: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        run = r.sources()[source]["last_run"]
        return run if run is not None and run["outcome"] != "running" else None

    return check


def test_sync_now_runs_the_source_as_a_job_and_shows_its_last_run(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    config = replica_config(f"sqlite:///{tmp_path / 'state.db'}", "http://127.0.0.1:9/none")
    with replica(tmp_path / "kb", embedder, config) as r:
        before = r.sources()
        assert list(before) == ["default", "notes", "tides"]
        assert before["notes"]["last_run"] is None and before["notes"]["next_run"] is None
        assert before["notes"]["schedule_seconds"] is None and not before["notes"]["running"]

        started = r.sync("notes")
        assert started.status_code == 202, started.text
        job_id = started.json()["job_id"]
        assert started.headers["location"] == f"/v1/jobs/{job_id}"

        run = wait_for("recorded", finished_run(r, "notes"))
        assert run["outcome"] == "done" and run["trigger"] == "request", run
        assert run["job_id"] == job_id and run["added"] == 1 and run["failed"] == 0
        assert run["finished_at"] >= run["started_at"] and "cost_usd" in run["usage"]
        assert not r.sources()["notes"]["running"]
        [job] = r.sync_jobs()
        assert job["id"] == job_id and job["status"] == "done" and job["source"] == "notes"
        hits = r.client.get("/v1/search", params={"query": "red boat"}, headers=auth(r.admin))
        assert "dawn" in hits.json()["results"][0]["content"]

        # a source that cannot list itself is skipped, saying why; one that fails says so
        assert r.sync("default").status_code == 202
        skipped = wait_for("recorded", finished_run(r, "default"))
        assert skipped["outcome"] == "skipped" and "paths" in skipped["reason"], skipped
        assert r.sync("tides").status_code == 202
        failed = wait_for("recorded", finished_run(r, "tides"))
        assert failed["outcome"] in ("failed", "done") and failed["job_id"], failed

        assert_error(r.sync("nowhere"), 404, "not_found")
        _, reader = r.shared.keys.create("default", "read", "reader")
        refused = r.client.post("/v1/sources/notes/sync", headers=auth(reader))
        assert_error(refused, 403, "forbidden")
        assert r.client.get("/v1/sources", headers=auth(reader)).status_code == 200
        paths = r.client.get("/openapi.json").json()["paths"]
        assert "409" in paths["/v1/sources/{name}/sync"]["post"]["responses"]


def test_a_scheduled_source_syncs_at_start_and_again_an_interval_later(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    config = replica_config(
        f"sqlite:///{tmp_path / 'state.db'}",
        "http://127.0.0.1:9/none",
        extra="    schedule: 10s\n",
    )
    with replica(tmp_path / "kb", embedder, config, sync_check_seconds=0.2) as r:
        first = wait_for("synced at start", finished_run(r, "notes"))
        assert first["outcome"] == "done" and first["trigger"] == "schedule", first
        assert first["added"] == 1
        status = r.sources()["notes"]
        assert status["schedule_seconds"] == 10 and status["scheduled"]
        started = datetime.fromisoformat(first["started_at"])
        assert datetime.fromisoformat(status["next_run"]) == started + timedelta(seconds=10)
        assert r.sources()["tides"]["next_run"] is None  # no schedule

        def second_run() -> dict[str, Any] | None:
            run = finished_run(r, "notes")()
            return run if run is not None and run["job_id"] != first["job_id"] else None

        second = wait_for("synced again", second_run, within=WAIT + 10)
        assert second["outcome"] == "done" and second["unchanged"] == 1, second
        again = datetime.fromisoformat(second["started_at"])
        assert again >= started + timedelta(seconds=10)
        assert len(r.sync_jobs()) == 2


def two_replicas_sync_one_source_once(tmp_path: Path, embedder: OnnxEmbedder, url: str) -> None:
    """Two replicas on the state database at ``url`` asked at once to sync the source
    whose page hangs: one runs it, the other answers 409; the lease and the job records
    name one run; once it ends the other may run it; a dead holder's lease expires."""
    gate = threading.Event()
    with ExitStack() as stack:
        page = stack.enter_context(PageServer(PAGE, gate=gate))
        stack.callback(gate.set)  # never leave a fetch hanging
        config = replica_config(url, page.url)
        a = stack.enter_context(replica(tmp_path / "a", embedder, config))
        b = stack.enter_context(replica(tmp_path / "b", embedder, config, admin=a.admin))

        both = threading.Barrier(2)

        def ask(r: Replica) -> httpx.Response:
            both.wait(10)
            return r.sync("tides")

        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(ask, (a, b)))
        statuses = sorted(answer.status_code for answer in answers)
        assert statuses == [202, 409], [answer.text for answer in answers]
        winner = a if answers[0].status_code == 202 else b
        loser = b if winner is a else a
        job_id = next(x.json()["job_id"] for x in answers if x.status_code == 202)
        conflict = next(x for x in answers if x.status_code == 409)
        assert_error(conflict, 409, "sync_running")

        leases = a.shared.syncs.leases("default", time.time_ns())
        assert list(leases) == ["tides"] and leases["tides"].job_id == job_id
        assert leases["tides"].holder == winner.holder
        for r in (a, b):  # one sync job, seen alike from both replicas
            assert [job["id"] for job in r.sync_jobs()] == [job_id]
            status = r.sources()["tides"]
            assert status["running"] and status["running_job"] == job_id
        assert_error(loser.sync("tides"), 409, "sync_running")  # still running: still 409

        gate.set()
        run = wait_for("recorded", finished_run(loser, "tides"))
        assert run["job_id"] == job_id and run["outcome"] == "done" and run["added"] == 1
        assert a.shared.syncs.leases("default", time.time_ns()) == {}

        again = loser.sync("tides")  # the lease was released: the other replica may run it
        assert again.status_code == 202, again.text
        rerun = wait_for(
            "recorded",
            lambda: (r := finished_run(a, "tides")()) and r["job_id"] != job_id and r,
        )
        assert rerun["job_id"] == again.json()["job_id"] and rerun["outcome"] == "done", rerun
        assert rerun["added"] == 1  # into the other replica's own vector store

        # a replica that died holding the lease: refused until its lease expires (a term
        # long enough that a loaded machine's slow request still comes inside it)
        now = time.time_ns()
        term = 6 * 10**9
        assert a.shared.syncs.take("notes", "default", "dead-replica", now + term, now)
        assert_error(b.sync("notes"), 409, "sync_running")
        time.sleep(max(0.0, (now + term - time.time_ns()) / 1e9) + 0.1)
        assert b.sync("notes").status_code == 202
        taken = a.shared.syncs.leases("default", time.time_ns()).get("notes")
        assert taken is None or taken.holder != "dead-replica"


def test_two_replicas_never_run_one_source_at_once(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    two_replicas_sync_one_source_once(tmp_path, embedder, f"sqlite:///{tmp_path / 'state.db'}")


def test_a_long_sync_keeps_renewing_its_lease(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    """A sync that outlasts its lease's term several times over still holds it: the other
    replica is refused all along, and the lease ends only when the sync does."""
    gate = threading.Event()
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with ExitStack() as stack:
        page = stack.enter_context(PageServer(PAGE, gate=gate))
        stack.callback(gate.set)
        config = replica_config(url, page.url)
        # renewed every second: a loaded machine may be late with one renewal, not two
        a = stack.enter_context(replica(tmp_path / "a", embedder, config, lease_seconds=3.0))
        b = stack.enter_context(replica(tmp_path / "b", embedder, config, admin=a.admin))
        job_id = a.sync("tides").json()["job_id"]
        first = a.shared.syncs.leases("default", time.time_ns())["tides"]
        wait_for("fetching", lambda: page.requests > 0)
        time.sleep(6.5)  # over two terms of the lease
        renewed = a.shared.syncs.leases("default", time.time_ns())["tides"]
        assert renewed.holder == a.holder and renewed.job_id == job_id
        assert renewed.expires_ns > first.expires_ns
        assert_error(b.sync("tides"), 409, "sync_running")
        gate.set()
        run = wait_for("recorded", finished_run(b, "tides"))
        assert run["job_id"] == job_id and run["outcome"] == "done"
        assert a.shared.syncs.leases("default", time.time_ns()) == {}


def test_shutdown_marks_a_running_sync_interrupted_and_frees_its_lease(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    gate = threading.Event()
    with PageServer(PAGE, gate=gate) as page:
        config = replica_config(f"sqlite:///{tmp_path / 'state.db'}", page.url)
        with replica(tmp_path / "kb", embedder, config) as r:
            job_id = r.sync("tides").json()["job_id"]
            wait_for("fetching", lambda: page.requests > 0)
            shared = SharedState.for_kb(r.kb_dir)

            def answer_once_marked() -> None:
                """The page answers once shutdown has marked the job (the server's
                executor waits for the fetch's thread, as it would for a slow page)."""

                def marked() -> bool:
                    record = shared.jobs.get("default", job_id)
                    return record is not None and record.status == "failed"

                try:
                    wait_for("marked", marked)
                finally:
                    gate.set()

            answering = threading.Thread(target=answer_once_marked, daemon=True)
            answering.start()
        answering.join(WAIT)
    try:
        assert shared.syncs.leases("default", time.time_ns()) == {}
        _, run = shared.syncs.runs("default")["tides"]
        assert run.outcome == "interrupted" and run.job_id == job_id, run
        record = shared.jobs.get("default", job_id)
        assert record is not None and record.status == "failed"
        assert "shut down" in record.body["error"]
    finally:
        shared.close()


def test_sigterm_stops_flexmatch_serve_mid_sync_marking_it_and_freeing_its_lease(
    tmp_path: Path,
) -> None:
    """The real command: SIGTERM while a sync's page is still loading."""
    from tests.adapters.http.test_replicas import _serving, _wait_ready

    gate = threading.Event()
    kb_dir = tmp_path / "kb"
    with PageServer(PAGE, gate=gate) as page:
        write_config(kb_dir, replica_config(f"sqlite:///{tmp_path / 'state.db'}", page.url))
        shared = SharedState.for_kb(kb_dir)
        try:
            _, admin = shared.keys.create("default", "admin", "admin")
            with _serving(kb_dir) as (process, url), httpx.Client(base_url=url) as client:
                _wait_ready(process, client, tmp_path / "kb.log")
                started = client.post("/v1/sources/tides/sync", headers=auth(admin))
                assert started.status_code == 202, started.text
                job_id = started.json()["job_id"]
                wait_for("fetching", lambda: page.requests > 0)
                assert list(shared.syncs.leases("default", time.time_ns())) == ["tides"]

                process.terminate()  # SIGTERM
                record = wait_for(
                    "marked",
                    lambda: (
                        (r := shared.jobs.get("default", job_id)) and r.status != "running" and r
                    ),
                )
                gate.set()  # the fetch's worker ends; the server may exit
                # uvicorn ends by raising the signal again, once its shutdown has run
                assert process.wait(30) in (0, -signal.SIGTERM)
            assert record.status == "failed" and "shut down" in record.body["error"]
            assert shared.syncs.leases("default", time.time_ns()) == {}
            _, run = shared.syncs.runs("default")["tides"]
            assert run.outcome == "interrupted" and run.job_id == job_id, run
        finally:
            gate.set()
            shared.close()
