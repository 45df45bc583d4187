"""The LLM's credentials through the real CLI against the fake LLM server on loopback:
the README's local-server example works with no key, a refused key fails the run at once
and is said once, and ``ingest --dry-run`` warns of a key that is missing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from flexmatch.testing import FakeLLMServer
from tests.conftest import run

KEYS = ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "FLEXMATCH_LLM_API_KEY", "FLEXMATCH_LLM_API_BASE")


def keyless(**env: str) -> dict[str, str]:
    """The caller's environment without any LLM key or base URL, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in KEYS and not k.startswith("FLEXMATCH_")}
    return {**base, **env}


def notes(folder: Path, count: int = 3) -> Path:
    folder.mkdir()
    for i in range(count):
        text = f"# Crane {i}\n\nHarbour crane {i} lifts forty tonnes. It was serviced in May.\n"
        (folder / f"crane-{i}.md").write_text(text, encoding="utf-8")
    return folder


def test_the_readme_local_server_example_needs_no_key(tmp_path: Path) -> None:
    docs = notes(tmp_path / "docs")
    assert run("init", str(tmp_path / "kb")).returncode == 0
    with FakeLLMServer() as server:
        env = keyless(FLEXMATCH_LLM="openai/qwen2.5", FLEXMATCH_LLM_API_BASE=server.base_url)
        dry = run("ingest", "--kb", str(tmp_path / "kb"), "--dry-run", str(docs), env=env)
        assert dry.returncode == 0 and "warning" not in dry.stderr, dry.stderr
        done = run("ingest", "--kb", str(tmp_path / "kb"), "--json", str(docs), env=env)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["added"] == 3 and report["failed"] == []
        assert report["usage"]["calls"] > 0
        assert server.stats()["statuses"] == {"200": report["usage"]["calls"]}


def test_a_refused_key_fails_the_run_at_once_and_is_said_once(tmp_path: Path) -> None:
    docs = notes(tmp_path / "docs")
    assert run("init", str(tmp_path / "kb")).returncode == 0
    with FakeLLMServer(api_key="the-right-one") as server:
        env = keyless(
            FLEXMATCH_LLM="openai/qwen2.5",
            FLEXMATCH_LLM_API_BASE=server.base_url,
            FLEXMATCH_LLM_API_KEY="a-wrong-one",
        )
        started = time.perf_counter()
        done = run("ingest", "--kb", str(tmp_path / "kb"), str(docs), env=env)
        took = time.perf_counter() - started
        refusals = server.stats()["statuses"].get("401", 0)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    # the questions and context chains may each have a call in flight, one a document
    # when a loaded machine lets the batch window close between them (3 documents: at most
    # 6); nothing is retried (4 retries with 1 s backoff would ask 5 times each: 10 or more)
    assert 1 <= refusals <= 6 and server.stats()["calls"] == refusals
    said = " ".join(done.stderr.split())
    assert said.count("refused the credentials") == 1, said
    assert "failed (3 documents: " in said and "401: Incorrect API key provided" in said
    assert "check FLEXMATCH_LLM_API_KEY" in said
    # no retry is counted above; this rules out a hang (a quiet machine: ~10 s, the command's
    # start and the model's load included)
    assert took < 120, took


def test_dry_run_warns_of_a_missing_key(tmp_path: Path) -> None:
    docs = notes(tmp_path / "docs", 1)
    assert run("init", str(tmp_path / "kb")).returncode == 0
    env = keyless(FLEXMATCH_LLM="openai/gpt-4o-mini")
    dry = run("ingest", "--kb", str(tmp_path / "kb"), "--dry-run", "--json", str(docs), env=env)
    assert dry.returncode == 0, dry.stderr
    json.loads(dry.stdout)  # the estimate is still the whole of standard output
    warning = " ".join(dry.stderr.split())
    assert "warning: the LLM 'openai/gpt-4o-mini' needs an API key" in warning
    assert "FLEXMATCH_LLM_API_KEY" in warning and "OPENAI_API_KEY" in warning
    plan = run("reindex", "--kb", str(tmp_path / "kb"), "--dry-run", env=env)
    assert plan.returncode == 0, plan.stderr
    assert "warning: the LLM 'openai/gpt-4o-mini' needs an API key" in " ".join(plan.stderr.split())
