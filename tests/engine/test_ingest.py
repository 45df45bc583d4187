"""The ingest path: exact and near-duplicate dedup, size caps, per-document failures, one
writer per document id."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.ingest.dedup import TwinOrder
from flexmatch.errors import ConfigError
from flexmatch.testing import FakeLLMServer
from tests.conftest import llm_config, write_config
from tests.engine.samples import HARBOUR, ORCHARD, match_points, write


def test_exact_duplicates_are_skipped_with_a_reason(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    first = write(tmp_path / "a", "harbour.md", HARBOUR)
    copy = write(tmp_path / "b", "harbour-copy.md", HARBOUR)
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([first, copy])
        again = kb.ingest([copy])
        assert len(kb.list_documents()) == 1
    assert report.added == 1 and len(report.duplicates) == 1
    assert "same content as document" in report.duplicates[0].reason
    assert again.added == 0 and len(again.duplicates) == 1


def test_of_twins_in_one_run_the_first_given_is_kept(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """Documents are checked side by side, so a later twin's check can end first; the one
    kept is still the first named, run after run."""
    first = write(tmp_path / "a", "harbour.md", HARBOUR)
    copies = [write(tmp_path / f"copy{i}", "harbour.md", HARBOUR) for i in range(7)]
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([first, *copies])
        (kept,) = kb.list_documents()
    assert kept.uri.endswith("/a/harbour.md"), kept.uri
    assert report.added == 1 and len(report.duplicates) == 7
    assert all("/copy" in d.uri for d in report.duplicates)


def test_a_later_twin_decides_only_after_every_earlier_one() -> None:
    """The order, not the timing: the second ticket's check waits for the first's."""

    async def run() -> list[str]:
        order = TwinOrder()
        first, second = order.take(), order.take()
        said: list[str] = []

        async def later() -> None:
            await order.turn(second)
            said.append("second")
            order.decided(second)

        waiting = asyncio.create_task(later())
        await asyncio.sleep(0.01)  # the second is ready first, and waits
        said.append("first")
        order.decided(first)
        await waiting
        await asyncio.wait_for(order.turn(order.take()), 5)  # none earlier open: no wait
        return said

    assert asyncio.run(asyncio.wait_for(run(), 30)) == ["first", "second"]


def test_near_duplicate_chunks_are_stored_once(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    shared = "Every visitor signs the register at the front desk."
    rules = f"# Visitor rules\n\n## Register\n\n{shared}\n\n"
    a = write(tmp_path / "d", "a.md", rules + "## Parking\n\nPark on level two.\n")
    b = write(tmp_path / "d", "b.md", rules + "## Food\n\nThe canteen serves lunch.\n")
    repeated = write(
        tmp_path / "d",
        "memo.md",
        "# Memo\n\n## Note\n\nBring a helmet.\n\n## Other\n\nNo dogs.\n\n"
        "## Note\n\nBring a helmet.\n",
    )
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        kb.ingest([a])
        report = kb.ingest([b, repeated])
        contents = [p["content"] for p in match_points(kb) if "content" in p]  # carriers
        memo = next(r for r in kb.list_documents() if r.uri.endswith("memo.md"))
    assert report.near_duplicate_chunks == 2  # b's register chunk, the memo's repeated note
    assert contents.count(shared) == 1
    assert memo.chunks == 2


def test_near_duplicate_threshold_can_be_turned_off(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    write_config(tmp_path / "kb", "ingest:\n  near_duplicate_threshold: null\n")
    a = write(tmp_path / "d", "a.md", "# A\n\nSame sentence everywhere in this text.\n")
    b = write(tmp_path / "d", "b.md", "# B\n\nSame sentence everywhere in this text.\n")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        report = kb.ingest([a, b])
    assert report.added == 2 and report.near_duplicate_chunks == 0


def test_size_caps(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    write_config(tmp_path / "kb", "ingest:\n  max_document_bytes: 200\n")
    small = write(tmp_path / "d", "small.md", "# S\n\nShort enough.\n")
    big = write(tmp_path / "d", "big.md", "# B\n\n" + "word " * 100)
    corpus = write(tmp_path / "d", "c.jsonl", '{"_id": "x", "text": "' + "long " * 100 + '"}\n')
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        report = kb.ingest([small, big, corpus])
    assert report.added == 1
    errors = " ".join(f.error for f in report.failed)
    assert "big.md: the file is 505 bytes, over the 200-byte cap" in errors
    assert "c.jsonl#x: extracted text is 499 bytes, over the 200-byte cap" in errors
    write_config(tmp_path / "kb2", "ingest:\n  max_document_bytes: 16000000\n")
    with pytest.raises(
        ConfigError, match=r"ingest\.max_document_bytes.*less than or equal to 15000000"
    ):
        KnowledgeBase.open(tmp_path / "kb2", env={})


def test_llm_failure_leaves_only_that_document_to_retry(
    tmp_path: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server).replace("llm_max_retries: 3", "llm_max_retries: 1"))
    harbour = write(tmp_path / "d", "harbour.md", HARBOUR)
    orchard = write(tmp_path / "d", "orchard.md", ORCHARD)
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        kb.ingest([harbour, orchard])
    orchard.write_text(ORCHARD + "\nPears follow in October.\n")
    llm_server.fail_next = [500] * 100
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        failed_run = kb.ingest([harbour, orchard])
        states = {r.uri.rsplit("/", 1)[-1]: r for r in kb.list_documents()}
        stats = kb.stats()
    assert failed_run.unchanged == 1 and len(failed_run.failed) == 1
    assert (
        states["orchard.md"].status == "failed"
        and "failed after retries" in states["orchard.md"].error
    )
    assert states["orchard.md"].version is not None  # the old version stays searchable
    assert stats.incomplete_documents == 1
    llm_server.reset()
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        retry = kb.ingest([harbour, orchard])
        assert kb.stats().incomplete_documents == 0
    assert retry.unchanged == 1 and retry.changed == 1
    # only the failed document was processed again: one group call per chain for its chunks
    # (its unchanged first chunk's answers come from the cache), the other one cost nothing
    assert llm_server.calls() == retry.usage.calls <= 2
    assert retry.usage.cached_calls >= 1


def test_one_id_twice_in_a_batch_is_written_in_turn(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    """Two corpus files of one run name the same id (within one file a repeated id is an
    error of its own): the second replaces the first, one writer at a time."""
    first = write(tmp_path / "d", "a.jsonl", '{"_id": "x", "text": "First text about harbours."}\n')
    second = write(
        tmp_path / "d", "b.jsonl", '{"_id": "x", "text": "Second text about orchards."}\n'
    )
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([first, second])
        (record,) = kb.list_documents()
        points = match_points(kb)
    assert report.added == 1 and report.changed == 1 and not report.failed
    assert record.status == "complete" and record.chunks == 1
    assert {p["content"] for p in points if "content" in p} == {"Second text about orchards."}
    assert {p["version"] for p in points} == {record.version}


def test_one_path_given_alone_is_one_input(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    """``ingest("notes.md")`` reads that file, not one input a character."""
    doc = write(tmp_path / "d", "harbour.md", HARBOUR)
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest(str(doc))  # type: ignore[arg-type]
        again = kb.ingest(doc)  # type: ignore[arg-type]
    assert report.added == 1 and not report.failed
    assert again.unchanged == 1 and not again.failed
