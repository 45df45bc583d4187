"""One tenant cannot fill the server with queued work: uploads wait on disk (owner-only, gone
when their job ends), and each tenant's waiting jobs and upload bytes are capped (429 with
``Retry-After`` naming the cap) while other tenants go on.

A tenant's queue is held still by a URL import whose page answers only when the test lets
it: the tenant's later jobs wait behind it, which is what a queue of slow jobs looks like.
"""

from __future__ import annotations

import io
import os
import re
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from flexmatch import KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.adapters.http.spool import LOCK_FILE, UploadSpool
from flexmatch.adapters.http.state import ServiceState
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore
from tests.adapters.http.servers import UvicornThread, assert_error, auth, wait_for_job
from tests.conftest import write_config

MAX_JOBS = 3
MAX_BYTES = 200_000
RETRY_AFTER = 7
CONFIG = f"""\
sources:
  default: {{}}
  web:
    type: web
    allow_hosts: ["127.0.0.1"]
    timeout: 120
service:
  queue:
    max_jobs_per_tenant: {MAX_JOBS}
    max_bytes_per_tenant: {MAX_BYTES}
    retry_after_seconds: {RETRY_AFTER}
"""
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class HeldPage:
    """A web page on 127.0.0.1 that answers only once ``release`` is called."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        gate = self.gate

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                gate.wait(120)
                body = b"<html><title>held</title><body><p>The page that held the queue.</p>"
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the server that asked was stopped meanwhile
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}"

    def release(self) -> None:
        self.gate.set()

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Service:
    url: str
    client: httpx.Client
    state: ServiceState
    keys: KeyStore
    kb_dir: Path

    def token(self, tenant: str) -> str:
        return self.keys.create(tenant, "read,write")[1]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Service]:
    kb_dir = tmp_path_factory.mktemp("queue") / "kb"
    write_config(kb_dir, CONFIG)
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    app = create_app(kb, limits=Limits(rate_per_second=1_000, burst=1_000))
    try:
        with UvicornThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            yield Service(server.url, client, app.state.service, KeyStore.for_kb(kb_dir), kb_dir)
    finally:
        kb.close()


@pytest.fixture
def held() -> Iterator[HeldPage]:
    page = HeldPage()
    try:
        yield page
    finally:
        page.close()


def _hold(service: Service, token: str, page: HeldPage) -> str:
    """Start a URL import that waits for ``page``: the tenant's later jobs queue behind it."""
    response = service.client.post(
        "/v1/documents/url",
        json={"urls": [page.url("held")], "source": "web"},
        headers=auth(token),
    )
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


def _upload(service: Service, token: str, size: int, name: str = "notes.txt") -> httpx.Response:
    line = b"The harbour master keeps the spare key of the boat shed.\n"
    data = (line * (size // len(line) + 1))[:size]
    files = [("files", (name, data))]
    return service.client.post("/v1/documents", files=files, headers=auth(token))


def _job_files(service: Service) -> list[Path]:
    """The spooled upload files of every job of this server."""
    return sorted(p for p in service.state.jobs.spool.folder.glob("job*/*") if p.is_file())


def _assert_capped(response: httpx.Response, code: str, cap: str) -> None:
    body = assert_error(response, 429, code)
    assert response.headers["Retry-After"] == str(RETRY_AFTER)
    assert cap in body["error"]["message"]


def test_a_tenant_over_its_job_cap_gets_429_and_another_tenant_goes_on(
    service: Service, held: HeldPage
) -> None:
    a, b = service.token("jobs-a"), service.token("jobs-b")
    first = _hold(service, a, held)
    queued = [_upload(service, a, 1_000, f"a{i}.txt") for i in range(MAX_JOBS - 1)]
    assert [r.status_code for r in queued] == [202] * (MAX_JOBS - 1)
    assert service.state.jobs.waiting("jobs-a")[0] == MAX_JOBS

    _assert_capped(_upload(service, a, 1_000), "too_many_queued_jobs", "max_jobs_per_tenant")
    # every kind of job counts: a URL import is refused the same way
    refused = service.client.post(
        "/v1/documents/url", json={"urls": [held.url("more")], "source": "web"}, headers=auth(a)
    )
    _assert_capped(refused, "too_many_queued_jobs", "max_jobs_per_tenant")

    other = _upload(service, b, 1_000, "b.txt")
    assert other.status_code == 202, other.text
    assert wait_for_job(service.client, other.json()["job_id"], b)["status"] == "done"

    held.release()
    for job_id in [first, *(r.json()["job_id"] for r in queued)]:
        assert wait_for_job(service.client, job_id, a)["status"] == "done"
    assert service.state.jobs.waiting("jobs-a") == (0, 0)
    assert _upload(service, a, 1_000).status_code == 202  # room again


def test_a_tenant_over_its_byte_cap_gets_429_and_spooled_files_are_owner_only_and_removed(
    service: Service, held: HeldPage
) -> None:
    c, d = service.token("bytes-c"), service.token("bytes-d")
    first = _hold(service, c, held)
    accepted = _upload(service, c, 120_000, "big.txt")
    assert accepted.status_code == 202, accepted.text
    assert service.state.jobs.waiting("bytes-c") == (2, 120_000)

    # the queued upload waits on disk, owner-only, in a folder owner-only too
    files = _job_files(service)
    assert [f.stat().st_size for f in files] == [120_000]
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    for folder in (files[0].parent, service.state.jobs.spool.folder, service.state.jobs.spool.base):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert service.state.jobs.spool.base == service.kb_dir / ".flexmatch" / "spool"

    _assert_capped(_upload(service, c, 100_000), "too_many_queued_bytes", "max_bytes_per_tenant")
    assert service.state.jobs.waiting("bytes-c") == (2, 120_000)  # the refusal holds nothing
    assert len(_job_files(service)) == 1

    other = _upload(service, d, 100_000, "d.txt")
    assert other.status_code == 202, other.text

    held.release()
    assert wait_for_job(service.client, first, c)["status"] == "done"
    for response, token in ((accepted, c), (other, d)):
        job = wait_for_job(service.client, response.json()["job_id"], token)
        assert job["status"] == "done" and job["counts"]["added"] == 1, job
    assert _job_files(service) == []
    assert list(service.state.jobs.spool.folder.iterdir()) == [
        service.state.jobs.spool.folder / LOCK_FILE
    ]
    assert service.state.jobs.waiting("bytes-c") == (0, 0)
    assert _upload(service, c, 100_000).status_code == 202


def test_the_console_import_form_is_capped_the_same_way(service: Service, held: HeldPage) -> None:
    e, f = service.token("console-e"), service.token("console-f")
    first = _hold(service, e, held)
    for i in range(MAX_JOBS - 1):
        assert _upload(service, e, 1_000, f"e{i}.txt").status_code == 202

    def import_form(token: str) -> httpx.Response:
        with httpx.Client(base_url=service.url, timeout=60) as browser:
            page = browser.get("/console/signin")
            match = CSRF.search(page.text)
            assert match
            origin = {"Origin": service.url, "Sec-Fetch-Site": "same-origin"}
            signed = browser.post(
                "/console/signin",
                data={"csrf": match.group(1), "api_key": token, "next": "/console/"},
                headers=origin,
            )
            assert signed.status_code in (302, 303), signed.text
            form = browser.get("/console/import")
            match = CSRF.search(form.text)
            assert match
            return browser.post(
                "/console/import",
                data={"csrf": match.group(1)},
                files=[("files", ("form.txt", b"Imported from the console form.\n"))],
                headers=origin,
            )

    refused = import_form(e)
    assert refused.status_code == 429, refused.text
    assert refused.headers["Retry-After"] == str(RETRY_AFTER)
    assert "max_jobs_per_tenant" in refused.text and "Traceback" not in refused.text

    accepted = import_form(f)
    assert accepted.status_code in (302, 303), accepted.text
    assert "/console/jobs/" in accepted.headers["Location"]

    held.release()
    assert wait_for_job(service.client, first, e)["status"] == "done"


def test_a_spool_sweeps_the_folders_of_stopped_servers_only(tmp_path: Path) -> None:
    base = tmp_path / "spool"
    live, crashed = UploadSpool(base), UploadSpool(base)
    for spool in (live, crashed):
        path = UploadSpool.write(spool.job_folder(), 0, io.BytesIO(b"waiting"))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    crashed_folder, live_folder = crashed.folder, live.folder
    assert crashed._lock is not None
    os.close(crashed._lock)  # its process died: the lock is gone, the files are not
    crashed._lock = None

    assert UploadSpool(base).sweep() == 1  # what a restarted server does first
    assert not crashed_folder.exists()
    assert list(live_folder.glob("job*/*"))  # a live server's files stay
    live.close()  # a server stopping removes its own
    assert not live_folder.exists()


def test_a_spool_that_cannot_be_written_is_a_clear_503_that_holds_nothing(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the spool folder should go")
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, f"service:\n  queue:\n    spool_dir: {blocker / 'spool'}\n")
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    app = create_app(kb, limits=Limits(rate_per_second=1_000, burst=1_000))
    token = KeyStore.for_kb(kb_dir).create("g", "read,write")[1]
    try:
        with UvicornThread(app) as server, httpx.Client(base_url=server.url) as client:
            response = client.post(
                "/v1/documents", files=[("files", ("a.txt", b"text"))], headers=auth(token)
            )
            body = assert_error(response, 503, "spool_unavailable")
            assert "on disk" in body["error"]["message"]
            assert response.headers["Retry-After"] == "30"
            assert app.state.service.jobs.waiting("g") == (0, 0)
    finally:
        kb.close()
