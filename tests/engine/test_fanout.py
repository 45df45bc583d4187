"""Distributed ingest on Ray: the same knowledge base as a local ingest, and a killed
worker's documents retried or reported failed, never half written.

Ray takes seconds to start, so the tests are few: one goes through the real CLI (its own
local cluster, 2 workers); the others share one local cluster of 2 CPUs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flexmatch import KnowledgeBase
from flexmatch.config import KBConfig
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.ingest.fanout import NAMESPACE, RayFanOut, RayOptions
from flexmatch.errors import ParseError
from flexmatch.inputs.parsing import parse_file
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import default_responder
from tests.conftest import DOCS, FLEXMATCH, llm_config, run, write_config

ray = pytest.importorskip("ray")

OFFLINE = "sources:\n  default: {}\n"  # no LLM: the offline default chains
FILES = ["codeblock.md", "fake.docx", "pdf_fake-memo.pdf"]  # parsed by the workers


def squad(squad_dev: Path, folder: Path, count: int) -> Path:
    """The first ``count`` squad-dev documents as a JSON Lines corpus."""
    lines = (squad_dev / "corpus.jsonl").read_text(encoding="utf-8")
    path = folder / "squad.jsonl"
    path.write_text("\n".join(lines.splitlines()[:count]) + "\n", encoding="utf-8")
    return path


def snapshot(kb: KnowledgeBase) -> dict[str, Any]:
    """Everything a reader can tell two knowledge bases apart by."""
    records = {
        r.id: (r.version, r.status, r.chunks, r.matching_texts, r.uri) for r in kb.list_documents()
    }
    points = kb.store.scroll("default", {"record": "match"})
    stats = kb.stats()
    return {
        "records": records,
        "point_ids": sorted(p.id for p in points),
        "counts": (stats.documents, stats.chunks, stats.matching_texts),
    }


def test_a_ray_ingest_through_the_cli_equals_a_local_one(
    tmp_path: Path, embedder: OnnxEmbedder, squad_dev: Path
) -> None:
    corpus = squad(squad_dev, tmp_path, 100)
    inputs = [str(corpus), *(str(DOCS / name) for name in FILES)]
    write_config(tmp_path / "local", OFFLINE)
    write_config(tmp_path / "ray", OFFLINE)
    with KnowledgeBase.open(tmp_path / "local", embedder=embedder, env={}) as kb:
        local = kb.ingest(inputs)
        expected = snapshot(kb)
    done = run(
        "ingest", "--kb", str(tmp_path / "ray"), "--ray", "--workers", "2", "--json", *inputs
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    with KnowledgeBase.open(tmp_path / "ray", embedder=embedder, env={}) as kb:
        got = snapshot(kb)
    assert local.added == report["added"] == 103 and report["failed"] == []
    assert report["chunks"] == local.chunks and report["matching_texts"] == local.matching_texts
    assert got == expected  # ids, versions, point ids, counts: all the same


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """One local Ray cluster (2 CPUs) for this module; an ingest in this process uses it."""
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level=logging.ERROR,
        log_to_driver=False,
        namespace=NAMESPACE,
    )
    yield ray
    ray.shutdown()


class KillFirstWorker:
    """A fake-LLM responder that kills the run's first worker at the first LLM call, when
    every worker holds documents that are not finished."""

    def __init__(self) -> None:
        self.killed: int | None = None
        self._lock = threading.Lock()

    def __call__(self, messages: list[dict]) -> str:
        with self._lock:
            if self.killed is None:
                names = [
                    a["name"]
                    for a in ray.util.list_named_actors(all_namespaces=True)
                    if a["namespace"] == NAMESPACE and a["name"].endswith("-0")
                ]
                (name,) = names
                worker = ray.get_actor(name, namespace=NAMESPACE)
                self.killed = ray.get(worker.pid.remote())
                os.kill(self.killed, signal.SIGKILL)
        return default_responder(messages)


def whole(kb: KnowledgeBase) -> list[str]:
    """Problems with what is stored: every document complete with exactly its committed
    version's points, or failed with none."""
    problems = []
    for record in kb.list_documents():
        points = kb.store.scroll("default", {"record": "match", "document_id": record.id})
        versions = {p.payload["version"] for p in points}
        if record.status == "complete":
            if versions != {record.version} or len(points) != record.matching_texts:
                problems.append(f"{record.id}: {len(points)} points of {versions}")
        elif record.status != "failed" or points:
            problems.append(f"{record.id}: {record.status} with {len(points)} points")
    return problems


@pytest.mark.parametrize("retries", [2, 0], ids=["retried", "no-retries"])
def test_a_killed_workers_documents_are_retried_never_half_written(
    cluster: Any,
    tmp_path: Path,
    embedder: OnnxEmbedder,
    llm_server: FakeLLMServer,
    retries: int,
    squad_dev: Path,
) -> None:
    """The documents a killed worker held died in company: each is tried again on a
    worker of its own, free of charge, so even with no retries they are all indexed."""
    corpus = squad(squad_dev, tmp_path, 24)
    write_config(tmp_path / "kb", llm_config(llm_server))
    llm_server.latency = 0.3
    killer = KillFirstWorker()
    llm_server.responder = killer
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        report = kb.ingest([corpus], ray=True, workers=2, retries=retries)
        assert killer.killed is not None and report.usage.calls > 0
        assert whole(kb) == []
        assert report.failed == [] and report.added == 24
        assert kb.stats().incomplete_documents == 0


def test_workers_parse_in_their_own_isolated_processes(cluster: Any, tmp_path: Path) -> None:
    """A reader handed a worker pool parses there, in one of the worker's killable
    processes: the same results and the same errors as in this process; a worker that
    dies while parsing fails that input (here with no retries left)."""
    pdf = DOCS / "pdf_fake-memo.pdf"

    async def main() -> tuple[int, int, Any, str, str]:
        options = RayOptions(workers=1, retries=0)
        config = KBConfig()
        async with RayFanOut.start(
            options,
            kb_dir=tmp_path,
            config=config,
            env={},
            llm_cache=None,
            usage=None,
            embedding_model=config.models.embedding,
        ) as fanout:
            pool = fanout.pool("parse")
            pid = await asyncio.to_thread(pool.run, os.getpid, label="pid")
            parsed = await asyncio.to_thread(pool.run, parse_file, pdf, label=str(pdf))
            with pytest.raises(ParseError) as slow:
                await asyncio.to_thread(pool.run, time.sleep, 5, label="slow.pdf", timeout=0.5)
            worker = fanout.infos[0].pid
            threading.Timer(1.0, os.kill, (worker, signal.SIGKILL)).start()
            with pytest.raises(ParseError) as died:
                await asyncio.to_thread(pool.run, time.sleep, 30, label="big.pdf")
            return pid, worker, parsed, str(slow.value), str(died.value)

    pid, worker, parsed, slow, died = asyncio.run(main())
    assert pid not in (os.getpid(), worker)
    assert parsed == parse_file(pdf)
    assert slow == "slow.pdf: parsing took longer than 0.5s and was stopped (ingest.parse_timeout)"
    assert died == (
        "big.pdf: the Ray worker parsing it died and its retries (0) ran out; "
        "nothing of it was written"
    )


def test_the_cli_joins_a_running_cluster(cluster: Any, tmp_path: Path, squad_dev: Path) -> None:
    """``--ray-address`` joins a cluster that is already up (no cluster is started); a
    second run finds every document unchanged."""
    corpus = squad(squad_dev, tmp_path, 10)
    write_config(tmp_path / "kb", OFFLINE)
    address = cluster.get_runtime_context().gcs_address
    args = ["ingest", "--kb", str(tmp_path / "kb"), "--ray-address", address, "--json"]
    env = {"RAY_AUTH_MODE": "token"}  # the fixture's cluster has token authentication
    first = run(*args, "--workers", "1", str(corpus), env=env)
    again = run(*args, "--workers", "1", str(corpus), env=env)
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    assert json.loads(first.stdout)["added"] == 10
    assert json.loads(again.stdout)["unchanged"] == 10


# A chunker plug-in, installed as a package with an entry point (on PYTHONPATH, which the
# CLI's own Ray cluster hands to its workers): POISON kills the worker chunking it, HANGME
# never returns, SLOW takes a while (so the other documents are in flight beside them).
RED_CHUNKER = """
import asyncio
import os
import signal
import threading

from flexmatch.chains import Chunker, register
from flexmatch.models import Section


@register("chunker", "red-kill")
class RedKill(Chunker):
    async def run(self, document):
        if "POISON" in document.text:
            os.kill(os.getpid(), signal.SIGKILL)
        if "HANGME" in document.text:
            threading.Event().wait(3600)
        if "SLOW" in document.text:
            await asyncio.sleep(2)
        return [Section(text=document.text)]
"""


def red_kb(tmp_path: Path, ingest: str = "") -> tuple[Path, dict[str, str]]:
    """A knowledge base chunked by the red-kill plug-in, and the environment that finds it."""
    site = tmp_path / "site"
    info = site / "redkill-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "redkill.py").write_text(RED_CHUNKER, encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: redkill\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[flexmatch.chains]\nredkill = redkill\n")
    kb = tmp_path / "kb"
    write_config(kb, f"sources:\n  default:\n    chunker: redkill\n{ingest}")
    (kb / "chains").mkdir()
    (kb / "chains" / "redkill.yaml").write_text("kind: chunker\ntype: red-kill\n")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return kb, {"PYTHONPATH": path}


def red_docs(folder: Path, *special: str) -> Path:
    folder.mkdir()
    for i in range(10):
        text = f"SLOW innocent note {i}: the harbour ferry leaves at {i} o'clock."
        (folder / f"note{i}.md").write_text(text + "\n")
    for word in special:
        (folder / f"{word.lower()}.md").write_text(f"{word} this document is hostile.\n")
    return folder


def test_a_poison_document_fails_alone_and_a_hanging_one_at_its_deadline(
    tmp_path: Path,
) -> None:
    """Through the CLI's own cluster: the document that kills its worker each time fails
    by itself (its retries spent only when it ran alone); the ten innocent ones in flight
    beside it are all stored; the one whose chunker hangs fails at ingest.chunk_timeout
    and the run goes on."""
    kb, env = red_kb(tmp_path, "ingest:\n  chunk_timeout: 5\n")
    docs = red_docs(tmp_path / "docs", "POISON", "HANGME")
    started = time.monotonic()
    done = run("ingest", "--kb", str(kb), "--ray", "--workers", "2", "--json", str(docs), env=env)
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr  # some documents failed, named
    report = json.loads(done.stdout)
    failed = {Path(f["uri"]).name: f["error"] for f in report["failed"]}
    poison, hang = str(docs / "poison.md"), str(docs / "hangme.md")
    assert failed == {
        "poison.md": f"{poison}: the Ray worker indexing it died and its retries (2) ran out; "
        "nothing of it was written",
        "hangme.md": f"{hang}: chunker chain 'redkill' (type 'red-kill') took longer than 5s "
        "and was left (ingest.chunk_timeout)",
    }
    assert report["added"] == 10
    assert took < 240
    listed = run("docs", "list", "--kb", str(kb), "--json", env=env)
    stored = [d for d in json.loads(listed.stdout) if d["status"] == "complete"]
    assert len(stored) == 10


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            found.setdefault(parent, []).append(int(entry.name))
    return found


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid``, with its command line."""
    children, found, todo = _children(), {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            try:
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            todo.append(child)
    return found


def alive(pid: int, cmdline: str) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        now = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return state != "Z" and now == cmdline


@pytest.mark.parametrize("after", [0.5, 5.0], ids=["while-parsing", "while-chunking"])
def test_sigterm_stops_a_ray_ingest_cleanly(tmp_path: Path, after: float) -> None:
    """SIGTERM during a run (as the workers parse its files, or once its chunker hangs):
    one line, exit 143, no stack dump from Ray's C++ layer, no call reaching Ray after it
    was shut down, and none of the cluster's processes left behind."""
    kb, env = red_kb(tmp_path)
    docs = red_docs(tmp_path / "docs", "HANGME")
    command = [str(FLEXMATCH), "ingest", "--kb", str(kb), "--ray", "--workers", "2", str(docs)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and process.poll() is None:
            below = descendants(process.pid)
            if sum("ray::IngestWorker" in c for c in below.values()) >= 2:
                break
            time.sleep(0.5)
        time.sleep(after)  # the workers parse the files; later HANGME's chunker hangs
        below = descendants(process.pid)
        assert any("raylet" in c for c in below.values()), below
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr
    for unwanted in ("SIGTERM received", "Traceback", "already been shutdown"):
        assert unwanted not in stderr, stderr
    assert "stopped by SIGTERM" in stderr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = {pid: c for pid, c in below.items() if alive(pid, c)}
        if not left:
            break
        time.sleep(0.5)
    for pid in left:  # a failing run leaves nothing behind either
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert left == {}
