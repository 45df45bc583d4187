"""kill -9 in the middle of a real CLI ingest, then a re-run: exactly the expected
documents and points, no duplicates, no orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from flexmatch import KnowledgeBase
from flexmatch.testing import FakeLLMServer
from tests.conftest import FLEXMATCH, run

TOPICS = [
    "harbour",
    "orchard",
    "library",
    "bakery",
    "railway",
    "museum",
    "garden",
    "bridge",
    "market",
    "school",
    "theatre",
    "airport",
]


def test_sigkill_mid_ingest_then_rerun_repairs(tmp_path: Path, llm_server: FakeLLMServer) -> None:
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
        "FLEXMATCH_LLM": "openai/fake",
        "FLEXMATCH_LLM_API_BASE": llm_server.base_url,
        "FLEXMATCH_LLM_API_KEY": "k",
    }
    env.pop("FLEXMATCH_KB", None)
    llm_server.latency = 0.15
    process = subprocess.Popen(
        [str(FLEXMATCH), "ingest", "--kb", str(kb), "--json", str(docs)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # 24 chunks: 6 question groups of 4 and 3 context groups of 8 when it runs to the end
    deadline = time.monotonic() + 120
    while llm_server.successful_calls() < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert llm_server.successful_calls() < 9  # it really was cut short

    llm_server.latency = 0.0
    result = subprocess.run(
        [str(FLEXMATCH), "ingest", "--kb", str(kb), "--json", str(docs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["failed"] == [] and report["repaired"] >= 1  # documents left mid-write
    assert report["added"] + report["changed"] + report["unchanged"] == len(TOPICS)

    with KnowledgeBase.open(kb, env={}) as base:
        records = base.list_documents()
        points = [h.payload for h in base.store.scroll("default", {"record": "match"})]
    assert sorted(Path(r.uri).stem for r in records) == sorted(TOPICS)
    assert all(r.status == "complete" and r.pending_version is None for r in records)
    versions = {r.id: r.version for r in records}
    assert all(p["version"] == versions[p["document_id"]] for p in points)  # no orphans
    keys = [(p["chunk_id"], p["matched_text"]) for p in points]
    assert len(keys) == len(set(keys))  # no duplicates
    assert len(points) == sum(r.matching_texts for r in records)
    assert sum(r.chunks for r in records) == 2 * len(TOPICS)
