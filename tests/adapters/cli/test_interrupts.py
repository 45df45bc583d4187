"""Ctrl-C (SIGINT) or SIGTERM in the middle of a real CLI ingest: it stops, says what it
stored, what is pending and what it spent, exits 130, and the next run repairs and
finishes the rest."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.testing import FakeLLMServer
from tests.adapters.cli.test_crash import TOPICS as PLACES
from tests.conftest import FLEXMATCH, run

# 36 documents of 2 chunks: ~27 LLM calls, enough that a stop lands mid-run
TOPICS = [f"{place}-{n}" for n in range(3) for place in PLACES]


def _setup(tmp_path: Path, llm_server: FakeLLMServer) -> tuple[Path, Path, dict[str, str]]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, topic in enumerate(TOPICS):
        (docs / f"{topic}.md").write_text(
            f"# The {topic}\n\nThe {topic} opens at {i + 6} o'clock every day.\n\n"
            f"## Staff\n\nThe {topic} employs {i + 3} people on weekdays.\n"
        )
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    env = {
        **os.environ,
        "COLUMNS": "200",
        "FLEXMATCH_LLM": "openai/fake",
        "FLEXMATCH_LLM_API_BASE": llm_server.base_url,
        "FLEXMATCH_LLM_API_KEY": "k",
    }
    env.pop("FLEXMATCH_KB", None)
    return docs, kb, env


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _default_sigint() -> None:
    """Ctrl-C as a terminal gives it, whatever the test runner's process ignores (a
    pytest-xdist worker ignores SIGINT, and a child inherits that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted(
    command: list[str],
    env: dict[str, str],
    llm_server: FakeLLMServer,
    signum: int,
    sigint_ignored: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``command`` stopped by ``signum`` once the LLM has answered 8 of its calls and
    the command had a moment to take the answers in (later calls wait 4 s each)."""
    llm_server.latency = 0.5
    before = llm_server.successful_calls()
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as `cmd &` in a script starts it: Ctrl-C is not for it, SIGTERM still is
        preexec_fn=_ignore_sigint if sigint_ignored else _default_sigint,
    )
    deadline = time.monotonic() + 120
    while llm_server.successful_calls() - before < 8 and time.monotonic() < deadline:
        time.sleep(0.02)
    # the calls still to come are held, so the stop lands mid-run however fast the
    # machine is (on a loaded one the rest once finished inside the moment below)
    llm_server.latency = 4.0
    time.sleep(1.5)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    llm_server.latency = 0.0
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _finish(kb: Path, docs: Path, env: dict[str, str]) -> dict[str, object]:
    """The next run: repairs what was left mid-write, ingests the rest."""
    command = [str(FLEXMATCH), "ingest", "--kb", str(kb), "--json", str(docs)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    assert report["failed"] == []
    assert report["added"] + report["changed"] + report["unchanged"] == len(TOPICS)
    with KnowledgeBase.open(kb, env={}) as base:
        records = base.list_documents()
    assert len(records) == len(TOPICS)
    assert all(r.status == "complete" and r.pending_version is None for r in records)
    return report


def test_ctrl_c_says_what_was_stored_pending_and_spent(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    docs, kb, env = _setup(tmp_path, llm_server)
    command = [str(FLEXMATCH), "ingest", "--kb", str(kb), str(docs)]
    result = _interrupted(command, env, llm_server, signal.SIGINT)
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr
    text = " ".join(result.stderr.split())
    assert "Interrupted. Stored " in text
    stored = re.search(r"Stored (\d+) documents", text)
    pending = re.search(r"Pending: (\d+) left mid-write .*?, (\d+) not reached", text)
    spent = re.search(r"Spent: (\d+) LLM calls \((\d+) from cache\), (\d+) tokens, \$", text)
    assert stored and pending and spent, text
    # the calls answered before the stop (one still in flight is not counted)
    assert 1 <= int(spent[1]) <= llm_server.successful_calls() and int(spent[3]) > 0
    found = int(stored[1]) + int(pending[1]) + int(pending[2])
    assert int(pending[1]) + int(pending[2]) > 0  # it really was cut short
    assert found <= len(TOPICS)
    report = _finish(kb, docs, env)
    assert report["repaired"] == int(pending[1])


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["sigint-handled", "sigint-ignored"])
def test_sigterm_stops_like_ctrl_c_with_a_json_summary(
    tmp_path: Path, llm_server: FakeLLMServer, sigint_ignored: bool
) -> None:
    docs, kb, env = _setup(tmp_path, llm_server)
    command = [str(FLEXMATCH), "ingest", "--kb", str(kb), "--json", str(docs)]
    result = _interrupted(command, env, llm_server, signal.SIGTERM, sigint_ignored)
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr
    summary = json.loads(result.stdout)
    assert summary["interrupted"] is True
    assert 1 <= summary["usage"]["calls"] <= llm_server.successful_calls()
    assert summary["usage"]["prompt_tokens"] > 0
    stored = summary["added"] + summary["changed"]
    assert len(summary["pending"]) + summary["not_reached"] > 0  # it really was cut short
    assert stored + len(summary["pending"]) + summary["not_reached"] <= len(TOPICS)
    report = _finish(kb, docs, env)
    assert report["repaired"] == len(summary["pending"])
    assert report["unchanged"] == stored  # what was stored before the stop is kept


def test_ctrl_c_during_reindex_stops_cleanly_and_the_next_run_finishes(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    docs, kb, env = _setup(tmp_path, llm_server)
    _finish(kb, docs, env)  # everything stored under one model
    env = {**env, "FLEXMATCH_LLM": "openai/fake-2"}  # another model: every chunk to redo
    command = [str(FLEXMATCH), "reindex", "--kb", str(kb)]
    result = _interrupted(command, env, llm_server, signal.SIGINT)
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr
    text = " ".join(result.stderr.split())
    assert "Interrupted. Stored " in text and "Pending: " in text, text
    spent = re.search(r"Spent: (\d+) LLM calls", text)
    assert spent and int(spent[1]) >= 1

    again = subprocess.run(
        [*command, "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    plan = run("reindex", "--kb", str(kb), "--dry-run", "--json", env=env)
    assert json.loads(plan.stdout)["stale"] == []  # the next run finished what was left


def test_sigterm_to_the_service_ends_its_running_job_failed_saying_why(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    import httpx

    from tests.adapters.cli.test_serve_lifecycle import _stop, _wait_ready
    from tests.adapters.http.servers import auth, free_port

    _docs, kb, env = _setup(tmp_path, llm_server)
    token = run("keys", "create", "--kb", str(kb), "--permissions", "read,write").stdout.strip()
    port = free_port()
    command = [str(FLEXMATCH), "serve", "--kb", str(kb), "--port", str(port)]

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*command, "--log-level", "warning"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "HF_HUB_OFFLINE": "1"},
        )

    server = start()
    try:
        _wait_ready(server, port)
        llm_server.latency = 1.0
        files = [
            ("files", (f"{topic}.md", f"# The {topic}\n\nThe {topic} opens at six.\n".encode()))
            for topic in TOPICS[:6]
        ]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            upload = client.post("/v1/documents", files=files, headers=auth(token))
            assert upload.status_code == 202, upload.text
            job_id = upload.json()["job_id"]
            deadline = time.monotonic() + 60
            while llm_server.successful_calls() < 1:  # asked, not answered: mid-run
                assert time.monotonic() < deadline, "the job never called the LLM"
                time.sleep(0.05)
        server.send_signal(signal.SIGTERM)
        # a graceful stop (uvicorn then ends by the signal it got, as a shell expects)
        assert server.wait(timeout=60) in (0, -signal.SIGTERM)
        assert "Traceback" not in _stop(server)
    finally:
        _stop(server)
        llm_server.latency = 0.0

    again = start()
    try:
        _wait_ready(again, port)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            job = client.get(f"/v1/jobs/{job_id}", headers=auth(token)).json()
        assert job["status"] == "failed", job
        assert job["error"] == "the server shut down before the job finished"
    finally:
        assert "Traceback" not in _stop(again)
