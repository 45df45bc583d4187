"""Cost before spending: ``ingest --dry-run`` renders the exact prompts, asks no LLM,
stores nothing, and prices what is not already in the LLM cache."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.testing import FakeLLMServer
from tests.conftest import run, write_config

DOC = "# Orchard\n\nApples are picked in September.\n\n## Storage\n\nFruit is kept cold.\n"


def _config(server: FakeLLMServer) -> str:
    return (
        "models:\n"
        "  llm: openai/gpt-4o-mini\n"  # a model litellm's local cost map prices
        f"  llm_api_base: {server.base_url}\n"
        "  llm_api_key: test-key\n"
    )


def test_estimate_prices_the_calls_and_spends_nothing(
    tmp_path: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    doc = tmp_path / "orchard.md"
    doc.write_text(DOC)
    write_config(tmp_path / "kb", _config(llm_server))
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        before = kb.run_sync(kb.aestimate([doc]))
        assert llm_server.calls() == 0 and kb.list_documents() == []
        assert before.documents == 1 and before.chunks == 2
        assert before.llm_calls == 2 and before.cached_calls == 0  # one group per chain
        assert before.calls_per_chunk == 1.0
        assert before.cost_usd > 0 and not before.unpriced_models
        assert before.prompt_tokens > 0 and before.cost_per_million_document_tokens
        report = kb.ingest([doc])
        assert llm_server.successful_calls() == 2 == report.usage.calls  # the estimate was exact
        after = kb.run_sync(kb.aestimate([doc]))
        assert after.llm_calls == 0 and after.cached_calls == 4 and after.cost_usd == 0


def test_cli_dry_run_json(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    doc = tmp_path / "orchard.md"
    doc.write_text(DOC)
    write_config(tmp_path / "kb", _config(llm_server))
    done = run("ingest", "--kb", str(tmp_path / "kb"), "--dry-run", "--json", str(doc))
    assert done.returncode == 0, done.stderr
    estimate = json.loads(done.stdout)
    assert estimate["llm_calls"] == 2 and estimate["chunks"] == 2
    assert estimate["peak_memory_bytes"] > 0 and estimate["disk_bytes"] > 0
    assert estimate["seconds"] >= estimate["read_seconds"]
    assert llm_server.calls() == 0
    said = run("ingest", "--kb", str(tmp_path / "kb"), "--dry-run", str(doc))
    line = next(x for x in said.stdout.splitlines() if x.startswith("time ~"))
    assert "embedding" in line and "2 LLM calls not timed" in line
    assert "peak memory ~" in said.stdout and "disk ~" in said.stdout
    assert not (tmp_path / "kb" / ".flexmatch" / "qdrant").exists()  # nothing stored


def test_a_dry_run_streams_its_documents(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    """Without LLM chains nothing needs the documents together: a dry run of a large
    corpus holds one at a time (a million-line corpus took 3 GB when it held them all)."""
    corpus = tmp_path / "big.jsonl"
    text = "The tide turns twice a day along this coast. " * 20  # ~1 KB a row
    rows = (json.dumps({"_id": f"d{i}", "text": f"{i}: {text}"}) for i in range(20_000))
    corpus.write_text("\n".join(rows) + "\n")
    write_config(tmp_path / "kb", "sources:\n  default: {}\n")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        tracemalloc.start()
        try:
            result = kb.run_sync(kb.aestimate([corpus]))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert result.documents == 20_000
    assert peak < 12 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB for 20 MB of text"


def test_a_dry_run_says_the_time_memory_and_disk_the_run_would_take(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """The matching texts are counted as the run makes them (exactly, offline), the time
    is the reading measured plus embedding at the rate measured on a sample, and memory
    and disk grow with what would be embedded and stored."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(6):
        sentences = " ".join(
            f"Orchard {n} keeps apples of kind {k} in cold rooms." for k in range(30)
        )
        storage = f"Orchard {n} stores its fruit for {n + 2} months at most."
        (docs / f"orchard{n}.md").write_text(
            f"# Orchard {n}\n\n{sentences}\n\n## Storage\n\n{storage}"
        )
    write_config(tmp_path / "kb", "sources:\n  default: {}\n")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        small = kb.run_sync(kb.aestimate([docs / "orchard0.md"]))
        estimate = kb.run_sync(kb.aestimate([docs]))
        report = kb.ingest([docs])
    assert estimate.matching_texts == report.matching_texts > 6 * 30
    assert estimate.embedded_per_second and estimate.embedded_per_second > 0
    assert estimate.seconds is not None
    embedding = estimate.matching_texts / estimate.embedded_per_second
    assert estimate.seconds == pytest.approx(estimate.read_seconds + embedding, abs=0.2)
    assert estimate.peak_memory_bytes and estimate.peak_memory_bytes > 100e6  # the model
    assert estimate.peak_memory_bytes > small.peak_memory_bytes  # type: ignore[operator]
    assert estimate.disk_bytes > small.disk_bytes > 0
