"""Re-indexing when a chain changes (its prompt text, params or model), from the archive of
committed documents, against the fake LLM server: the plan finds the stale documents and
prices only the changed chain's calls, the re-index pays exactly that, and a metadata-only
update costs no LLM call at all.

What a chain's calls cost is measured on the first ingest (the chat requests of each
chain), so the checks hold however many chunks one call covers; the cache answers chunk
by chunk, so what it saves is counted in chunks."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.models import DocumentRecord, IngestReport
from flexmatch.resources import builtin_dir
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import RecordedRequest
from tests.conftest import llm_config, run, write_config

ORCHARD = """# Orchard handbook

The orchard grows apples and pears on the north hill.

## Harvest

Apples are picked by hand in late September. Pears are picked two weeks later.
"""

FERRY = """# Ferry guide

The ferry crosses the bay every forty minutes.

## Tickets

A return ticket costs eight euros; children travel free on weekends.
"""
USER = "the way a user would ask them"
CUSTOMER = "the way a customer would ask them"


@pytest.fixture
def docs(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "docs"
    folder.mkdir()
    paths = [folder / "orchard.md", folder / "ferry.md"]
    for path, text in zip(paths, (ORCHARD, FERRY), strict=True):
        path.write_text(text, encoding="utf-8")
    return paths


def _prompt(request: RecordedRequest) -> str:
    return "\n".join(str(m.get("content", "")) for m in request.body["messages"])


def _chain_of(request: RecordedRequest) -> str:
    prompt = _prompt(request)
    if "<document>" in prompt:
        return "context"
    return "questions" if "<chunk" in prompt else "other"


@dataclass
class Ingested:
    kb_dir: Path
    ids: list[str]
    chunks: int
    questions_calls: int  # chat requests the questions chain sent on the first ingest
    context_calls: int  # and the context chain


def _ingested(
    tmp_path: Path, docs: list[Path], embedder: OnnxEmbedder, server: FakeLLMServer
) -> Ingested:
    """A knowledge base with both documents ingested through the LLM chains."""
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(server))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.ingest(docs)
    assert report.added == 2 and not report.failed
    assert report.chunks >= 4  # each document has a title section and one more
    chains = [_chain_of(r) for r in server.requests_to("/chat/completions")]
    assert server.calls() == report.usage.calls == len(chains)
    assert chains.count("questions") >= 1 and chains.count("context") >= 1
    assert chains.count("questions") + chains.count("context") == len(chains)
    return Ingested(
        kb_dir,
        list(report.document_ids),
        report.chunks,
        chains.count("questions"),
        chains.count("context"),
    )


def _edit_questions_prompt(kb_dir: Path) -> None:
    builtin = (builtin_dir("prompts") / "questions.j2").read_text(encoding="utf-8")
    assert USER in builtin
    (kb_dir / "prompts").mkdir(exist_ok=True)
    (kb_dir / "prompts" / "questions.j2").write_text(
        builtin.replace(USER, CUSTOMER), encoding="utf-8"
    )


def test_prompt_edit_makes_documents_stale_and_reindex_pays_only_that_chain(
    tmp_path: Path, docs: list[Path], embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    first = _ingested(tmp_path, docs, embedder, llm_server)
    kb_dir = first.kb_dir
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        assert kb.run_sync(kb.areindex_plan()).stale == []  # nothing changed yet
    sent_at_ingest = llm_server.calls()

    _edit_questions_prompt(kb_dir)
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        plan = kb.run_sync(kb.areindex_plan())
    assert sorted(plan.stale) == sorted(first.ids) and plan.missing == []
    assert plan.documents == 2
    estimate = plan.estimate
    assert estimate.documents == 2 and estimate.chunks == first.chunks
    assert estimate.llm_calls == first.questions_calls  # the questions chain's new prompts
    assert estimate.cached_calls == first.chunks  # the context chain's answers, cached
    assert estimate.prompt_tokens > 0 and estimate.completion_tokens > 0
    assert llm_server.calls() == sent_at_ingest  # planning sent nothing

    # a plain re-ingest (of a copy) no longer finds them unchanged, and pays the same
    copy = tmp_path / "copy"
    shutil.copytree(kb_dir, copy)
    with KnowledgeBase.open(copy, embedder=embedder, env={}) as kb:
        again = kb.ingest(docs)
    assert again.unchanged == 0 and again.changed == 2
    assert again.usage.calls == first.questions_calls
    sent_before = llm_server.calls()

    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.reindex()
        sent = llm_server.requests_to("/chat/completions")[sent_before:]
        after = kb.run_sync(kb.areindex_plan())
        records = {r.id: r for r in kb.list_documents()}
    assert len(sent) == estimate.llm_calls == report.usage.calls  # as estimated, exactly
    assert all(_chain_of(r) == "questions" and CUSTOMER in _prompt(r) for r in sent)
    assert report.usage.cached_calls >= 1
    assert report.changed == 2 and not report.failed and report.unchanged == 0
    assert after.stale == [] and after.estimate.llm_calls == 0 and after.estimate.chunks == 0
    assert llm_server.calls() == sent_before + len(sent)  # planning again sent nothing
    assert sorted(records) == sorted(first.ids)
    assert all(r.status == "complete" for r in records.values())
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        assert kb.ingest(docs).unchanged == 2  # the re-index is what an ingest would make
        points = kb.store.scroll("default", {"record": "match"})
    assert llm_server.calls() == sent_before + len(sent)
    questions = {h.payload["matched_text"] for h in points}
    assert "What does the text say about pears are picked two weeks later?" in questions


@pytest.mark.parametrize("change", ["questions params", "llm model"])
def test_chain_params_or_model_change_make_documents_stale(
    tmp_path: Path,
    docs: list[Path],
    embedder: OnnxEmbedder,
    llm_server: FakeLLMServer,
    change: str,
) -> None:
    first = _ingested(tmp_path, docs, embedder, llm_server)
    if change == "questions params":
        config = llm_config(
            llm_server,
            "sources:\n  default:\n    matching_text: {chain: questions, params: {count: 2}}\n",
        )
        # only the questions chain changes: its prompts are paid, the context ones cached
        paid, cached, model = first.questions_calls, first.chunks, "fake-model"
    else:
        config = llm_config(llm_server).replace("llm: openai/fake-model", "llm: openai/other")
        # another model answers every chain: nothing is cached for it
        paid, cached, model = first.questions_calls + first.context_calls, 0, "other"
    write_config(first.kb_dir, config)
    with KnowledgeBase.open(first.kb_dir, embedder=embedder, env={}) as kb:
        plan = kb.run_sync(kb.areindex_plan())
        assert sorted(plan.stale) == sorted(first.ids)
        assert (plan.estimate.llm_calls, plan.estimate.cached_calls) == (paid, cached)
        sent_before = llm_server.calls()
        report = kb.reindex()
        assert kb.run_sync(kb.areindex_plan()).stale == []
    assert report.changed == 2 and report.usage.calls == paid
    sent = llm_server.requests_to("/chat/completions")[sent_before:]
    assert len(sent) == paid and {r.body["model"] for r in sent} == {model}


def test_cli_reindex_dry_run_prints_the_plan_and_changes_nothing(
    tmp_path: Path, docs: list[Path], embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    first = _ingested(tmp_path, docs, embedder, llm_server)
    kb_dir = first.kb_dir
    _edit_questions_prompt(kb_dir)
    sent_before = llm_server.calls()
    result = run("reindex", "--kb", str(kb_dir), "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert sorted(plan["stale"]) == sorted(first.ids) and plan["documents"] == 2
    assert plan["tenant"] == "default" and plan["missing"] == []
    estimate = plan["estimate"]
    assert estimate["chunks"] == first.chunks
    assert estimate["llm_calls"] == first.questions_calls
    assert estimate["cached_calls"] == first.chunks
    assert llm_server.calls() == sent_before  # a dry run sends nothing
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        assert sorted(kb.run_sync(kb.areindex_plan()).stale) == sorted(first.ids)  # still

    human = run("reindex", "--kb", str(kb_dir), "--dry-run")
    assert human.returncode == 0, human.stderr
    said = " ".join(human.stdout.split())
    assert "2 of 2 documents would be re-indexed" in said
    paid, cached = first.questions_calls, first.chunks
    assert f"{paid} LLM calls to pay for ({cached} answered by the cache)" in said
    assert llm_server.calls() == sent_before

    done = run("reindex", "--kb", str(kb_dir), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["changed"] == 2 and report["usage"]["calls"] == paid
    assert llm_server.calls() == sent_before + paid
    empty = json.loads(run("reindex", "--kb", str(kb_dir), "--dry-run", "--json").stdout)
    assert empty["stale"] == [] and empty["estimate"]["llm_calls"] == 0


def _update_ferry_metadata(
    tmp_path: Path, docs: list[Path], embedder: OnnxEmbedder, server: FakeLLMServer
) -> tuple[KnowledgeBase, DocumentRecord, IngestReport, int]:
    """The knowledge base (open), the ferry document's record before the update, the
    update's report and the chat requests the update sent."""
    first = _ingested(tmp_path, docs, embedder, server)
    kb = KnowledgeBase.open(first.kb_dir, embedder=embedder, env={})
    ferry = next(r for r in kb.list_documents() if r.uri.endswith("ferry.md"))
    docs[1].unlink()  # the archive is read, never the source file
    sent_before = server.calls()
    report = kb.run_sync(kb.aupdate_metadata(ferry.id, {"team": "harbour", "year": 2024}))
    return kb, ferry, report, server.calls() - sent_before


def test_metadata_only_update_reindexes_from_the_archive_and_is_filterable(
    tmp_path: Path, docs: list[Path], embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    kb, ferry, report, _ = _update_ferry_metadata(tmp_path, docs, embedder, llm_server)
    with kb:
        assert report.changed == 1 and not report.failed and report.document_ids == [ferry.id]
        tagged = kb.query("ticket price", filters={"team": "harbour"})
        by_year = kb.query("ticket price", filters={"metadata.year": 2024})
        other = kb.query("ticket price", filters={"team": "orchard"})
        record = kb.get_document(ferry.id).document
        assert kb.run_sync(kb.areindex_plan()).stale == []
    assert tagged and {r.document_id for r in tagged} == {ferry.id}
    assert "eight euros" in tagged[0].content and tagged[0].metadata["team"] == "harbour"
    assert {r.document_id for r in by_year} == {ferry.id}
    assert other == []
    assert record.metadata == {"team": "harbour", "year": 2024} and record.status == "complete"
    assert record.version != ferry.version and record.chunks == ferry.chunks


def test_metadata_only_update_pays_no_llm_call(
    tmp_path: Path, docs: list[Path], embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    """The text, the chunks and the chains are the same: every answer comes from the cache
    (each chunk's answer is cached without the document's metadata)."""
    kb, ferry, report, sent = _update_ferry_metadata(tmp_path, docs, embedder, llm_server)
    kb.close()
    assert report.changed == 1 and not report.failed
    assert sent == 0
    assert report.usage.calls == 0
    assert report.usage.cached_calls == 2 * ferry.chunks  # questions and context, per chunk
