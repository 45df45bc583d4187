"""A real ``flexmatch serve``'s log and metrics: with LLM chains calling the fake LLM
server, its log holds one access line per request, nothing of LiteLLM's per-call
chatter at INFO, and in JSON mode nothing but JSON objects; a scrape of ``/metrics``
shows the ingest, the search and the LLM calls that were made."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flexmatch.adapters.http.logs import install_logging
from flexmatch.testing.fake_llm import FakeLLMServer
from tests.adapters.http.servers import auth, free_port, new_key, wait_for_job
from tests.conftest import llm_config, stop, write_config

FLEXMATCH = Path(sys.executable).parent / "flexmatch"
READY_WITHIN = 120.0
NOTE = b"# Spare key\n\nThe spare key of the shed is under the blue flower pot by the door."


@dataclass
class Serving:
    client: httpx.Client
    log: Path
    tokens: dict[str, str]


METRICS_TOKEN = "operator-metrics-token-0123456789"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEXMATCH_", "LITELLM"))}
    return {**env, "HF_HUB_OFFLINE": "1", **extra}


@contextmanager
def serving(tmp_path: Path, llm: FakeLLMServer, *args: str, **env: str) -> Iterator[Serving]:
    """``flexmatch serve`` over a new knowledge base whose LLM is ``llm``, its output in a
    file; stopped (and its log complete) when the block ends."""
    kb = tmp_path / "kb"
    write_config(kb, llm_config(llm, f"service:\n  metrics_token: {METRICS_TOKEN}\n"))
    tokens = {
        "admin": new_key(kb, "ops", "admin"),
        "rw": new_key(kb, "acme", "read,write"),
    }
    port = free_port()
    log_path = tmp_path / "serve.log"
    command = [str(FLEXMATCH), "serve", "--kb", str(kb), "--port", str(port), *args]
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, text=True, env=_env(**env)
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                deadline = time.monotonic() + READY_WITHIN
                while True:
                    if process.poll() is not None:
                        raise AssertionError(f"serve exited:\n{log_path.read_text()[-2000:]}")
                    try:
                        if client.get("/health/ready").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert time.monotonic() < deadline, log_path.read_text()[-2000:]
                    time.sleep(0.2)
                yield Serving(client, log_path, tokens)
        finally:
            stop(process)


def _ingest_and_search(served: Serving) -> None:
    token = served.tokens["rw"]
    accepted = served.client.post(
        "/v1/documents", files={"files": ("shed.md", NOTE)}, headers=auth(token)
    )
    assert accepted.status_code == 202, accepted.text
    job = wait_for_job(served.client, accepted.json()["job_id"], token)
    assert job["status"] == "done" and job["counts"]["added"] == 1, job
    found = served.client.get(
        "/v1/search", params={"query": "Where is the spare key?"}, headers=auth(token)
    )
    assert found.status_code == 200 and "blue flower pot" in found.text, found.text


def test_json_log_metrics_and_no_library_chatter(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    with serving(tmp_path, llm_server, FLEXMATCH_LOG_FORMAT="json") as served:
        _ingest_and_search(served)
        calls = len(llm_server.requests)
        assert calls >= 2  # questions for the note, the query's rewrite
        scraped = served.client.get("/metrics", headers=auth(METRICS_TOKEN))
        assert scraped.status_code == 200, scraped.text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(scraped.text)
        for s in family.samples
    }
    assert samples[("flexmatch_ingest_documents_total", (("outcome", "added"),))] == 1
    assert samples[("flexmatch_llm_calls_total", ())] == calls
    assert samples[("flexmatch_llm_tokens_total", (("kind", "prompt"),))] > 0
    assert samples[("flexmatch_search_stage_seconds_count", (("stage", "embed"),))] == 1
    search = (("method", "GET"), ("route", "/v1/search"), ("status", "200"))
    assert samples[("flexmatch_http_requests_total", search)] == 1

    text = served.log.read_text(encoding="utf-8")
    entries = [json.loads(line) for line in text.splitlines() if line.strip()]  # JSON only
    assert any("Uvicorn running on" in e["message"] for e in entries)  # uvicorn's lines too
    access = [e for e in entries if e["logger"] == "flexmatch.http.access"]
    upload = next(e for e in access if e["route"] == "/v1/documents")
    assert (upload["method"], upload["status"], upload["tenant"]) == ("POST", 202, "acme")
    assert isinstance(upload["duration_ms"], float) and upload["client"] == "127.0.0.1"
    assert {"/v1/jobs/{job_id}", "/v1/search", "/metrics", "/health/ready"} <= {
        e["route"] for e in access
    }
    assert not [e for e in entries if e["logger"].startswith(("LiteLLM", "httpx"))]
    assert not any(token in text for token in served.tokens.values())


def test_text_log_has_access_lines_and_no_litellm_lines_at_info(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    with serving(tmp_path, llm_server) as served:
        _ingest_and_search(served)
        root = served.client.get("/")
        assert root.status_code == 307 and root.headers["location"] == "/console/"
    text = served.log.read_text(encoding="utf-8")
    assert len(llm_server.requests) >= 2  # the LLM was called: LiteLLM had its say
    assert "litellm" not in text.lower() and "HTTP Request:" not in text
    lines = text.splitlines()
    assert any(
        line.startswith("INFO:     GET /v1/search 200 ")
        and line.endswith("tenant=acme client=127.0.0.1")
        for line in lines
    ), text
    assert any(line.startswith("INFO:     GET / 307 ") for line in lines), text
    assert "Uvicorn running on http://127.0.0.1:" in text


def test_an_unknown_log_format_is_refused_in_one_line(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write_config(kb, "")
    for args, env in (
        (["--log-format", "xml"], {}),
        ([], {"FLEXMATCH_LOG_FORMAT": "yaml"}),
    ):
        done = subprocess.run(
            [str(FLEXMATCH), "serve", "--kb", str(kb), *args],
            capture_output=True,
            text=True,
            env=_env(**env, COLUMNS="200"),
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert "Invalid value for --log-format: use text or json" in done.stderr
        assert "Traceback" not in done.stderr


def test_every_worker_logs_json_too(tmp_path: Path) -> None:
    """``--workers 2`` (over a Qdrant address nothing listens on: the workers start, the
    store is unavailable): the supervisor's lines and each worker's are JSON."""
    kb = tmp_path / "kb"
    write_config(kb, "store:\n  url: http://127.0.0.1:9\n")
    port = free_port()
    log_path = tmp_path / "serve.log"
    command = [str(FLEXMATCH), "serve", "--kb", str(kb), "--port", str(port), "--workers", "2"]
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(FLEXMATCH_LOG_FORMAT="json"),
        )
        try:
            deadline = time.monotonic() + READY_WITHIN
            while log_path.read_text().count("Started server process") < 2:
                assert process.poll() is None, log_path.read_text()[-2000:]
                assert time.monotonic() < deadline, log_path.read_text()[-2000:]
                time.sleep(0.2)
            for _ in range(4):
                assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        finally:
            stop(process)
    entries = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    started = [e for e in entries if e["message"].startswith("Started server process")]
    assert len(started) == 2
    access = [e for e in entries if e["logger"] == "flexmatch.http.access"]
    assert [(e["route"], e["status"]) for e in access] == [("/health", 200)] * 4


def test_a_library_warning_is_a_json_line_too(capfd: pytest.CaptureFixture[str]) -> None:
    """A library's ``warnings.warn`` (qdrant-client warns when it cannot read a server's
    version) is written by the server's handler, so a JSON log has no plain line in it."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        install_logging("info", "json")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("Failed to obtain server version.", UserWarning, stacklevel=1)
    finally:
        logging.captureWarnings(False)
        root.handlers[:], root.level = saved_handlers, saved_level
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert lines, "the warning was not written"
    entries = [json.loads(line) for line in lines]
    assert any("Failed to obtain server version" in e["message"] for e in entries), entries
    assert all(e["logger"] == "py.warnings" for e in entries), entries
