"""End to end through the real ``flexmatch`` command, offline, on real files."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import DOCS, run


@pytest.fixture(scope="module")
def cli_kb(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A knowledge base made by ``init`` + one bulk ``ingest`` of awkward and good files."""
    docs = DOCS
    work = tmp_path_factory.mktemp("cli")
    bulk = work / "bulk"
    bulk.mkdir()
    for name in (
        "pdf_fake-memo.pdf",
        "handbook-1p.docx",
        "example-10k-1p.html",
        "codeblock.md",
        "stanley-cups.xlsx",
        "pdf_password.pdf",
        "fake-power-point.pptx",
    ):
        shutil.copy(docs / name, bulk / name)
    (bulk / "broken.docx").write_bytes(b"PK\x03\x04 this is not really a docx")
    (bulk / "empty.txt").write_bytes(b"")
    (bulk / "blob.bin").write_bytes(bytes(range(256)))
    (bulk / ".hidden.md").write_text("# Secret\n\nnever ingested\n")
    kb = work / "kb"
    assert run("init", str(kb)).returncode == 0
    return kb, run("ingest", "--kb", str(kb), str(bulk))


def test_bulk_ingest_reports_bad_files_and_goes_on(
    cli_kb: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    _, result = cli_kb
    assert result.returncode == 2, result.stderr  # some inputs failed: each one named
    assert "Ingested 6 documents" in result.stdout
    assert "Traceback" not in result.stderr
    errors = " ".join(result.stderr.split())
    for expected in (
        "pdf_password.pdf: PDF is encrypted",
        "broken.docx: could not parse",
        # a folder walk passes over what no parser reads: counted by reason, not failed
        "skipped (empty): 1 file: empty.txt",
        "skipped (unsupported type): 1 file [.bin 1]: blob.bin",
    ):
        assert expected in errors
    assert "no LLM configured" in errors and "hidden" not in result.stdout + errors


def test_query_json_puts_the_right_document_first(
    cli_kb: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    kb, _ = cli_kb
    result = run(
        "query",
        "--kb",
        str(kb),
        "--json",
        "--top-n",
        "3",
        "How many Stanley Cups have the Blues won?",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert len(data["results"]) == 3
    first = data["results"][0]
    assert first["uri"].endswith("stanley-cups.xlsx") and "Blues" in first["content"]
    assert first["matched_text"] and first["qualifying_text"].startswith("From stanley-cups")


def test_query_from_kb_env_and_markdown(
    cli_kb: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    kb, _ = cli_kb
    result = run(
        "query",
        "--markdown",
        "What is a fenced code block in markdown?",
        env={"FLEXMATCH_KB": str(kb)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("## Facts from the knowledge base")
    assert "codeblock.md" in result.stdout.split("### 2.")[0]


def test_chains_lists_types_and_resolution(
    cli_kb: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    kb, _ = cli_kb
    result = run("chains", "--kb", str(kb))
    assert result.returncode == 0, result.stderr
    assert "questions" in result.stdout and "structure" in result.stdout
    assert "sentences" in result.stdout  # what 'questions' resolves to offline


def test_config_error_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "flexmatch.yaml").write_text("query:\n  top_n: zero\n")
    result = run("query", "--kb", str(tmp_path), "anything")
    assert result.returncode == 2
    assert "flexmatch.yaml: field 'query.top_n'" in result.stderr
    assert "Traceback" not in result.stderr


def test_llm_configured_by_environment_uses_llm_chains(tmp_path: Path, llm_server) -> None:
    docs = DOCS
    kb = tmp_path / "kb"
    env = {
        "FLEXMATCH_LLM": "openai/fake-model",
        "FLEXMATCH_LLM_API_BASE": llm_server.base_url,
        "FLEXMATCH_LLM_API_KEY": "test-key",
    }
    assert run("init", str(kb)).returncode == 0
    result = run("ingest", "--kb", str(kb), "--json", str(docs / "pdf_fake-memo.pdf"), env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["documents"] == 1 and report["usage"]["calls"] == 2  # questions + context
    assert report["usage"]["prompt_tokens"] > 0
    result = run("query", "--kb", str(kb), "--json", "blankets delivered", env=env)
    first = json.loads(result.stdout)["results"][0]
    assert first["qualifying_text"].startswith('This section of "fake-memo"')
    assert first["uri"].endswith("pdf_fake-memo.pdf")
    rewrites = [
        r for r in llm_server.requests_to("/chat/completions") if "<query>" in json.dumps(r.body)
    ]
    assert len(rewrites) == 1


def test_document_management_commands(
    cli_kb: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    kb, _ = cli_kb
    listed = json.loads(run("docs", "list", "--kb", str(kb), "--json").stdout)
    assert len(listed) == 6 and all(r["status"] == "complete" for r in listed)
    memo = next(r for r in listed if r["uri"].endswith("pdf_fake-memo.pdf"))
    shown = json.loads(run("docs", "show", "--kb", str(kb), "--json", memo["id"]).stdout)
    assert shown["document"]["id"] == memo["id"] and shown["chunks"]
    assert shown["chunks"][0]["matching_texts"] and shown["chunks"][0]["qualifying_text"]
    stats = json.loads(run("stats", "--kb", str(kb), "--json").stdout)
    assert stats["documents"] == 6 and stats["sources"]["default"]["documents"] == 6
    other = run("docs", "remove", "--kb", str(kb), "--tenant", "someone-else", memo["id"])
    assert (
        other.returncode == 2
        and f"no document '{memo['id']}' in tenant 'someone-else'" in other.stderr
    )
    human = run("docs", "list", "--kb", str(kb))
    assert "pdf_fake-memo.pdf" in human.stdout.replace("\n", "")


def test_unchanged_reingest_reports_unchanged(
    cli_kb: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    kb, _ = cli_kb
    docs = DOCS
    result = run("ingest", "--kb", str(kb), "--json", str(kb.parent / "bulk"))
    report = json.loads(result.stdout)
    assert report["unchanged"] == 6 and report["documents"] == 0 and len(report["failed"]) == 2
    assert report["skipped"] == {"empty": 1, "unsupported type": 1}  # skipped again, not failed
    copy = json.loads(
        run("ingest", "--kb", str(kb), "--json", str(docs / "pdf_fake-memo.pdf")).stdout
    )
    assert copy["documents"] == 0 and "same content as document" in copy["duplicates"][0]["reason"]


def test_docs_show_lists_learned_texts_and_docs_unlearn_removes_one(
    cli_kb: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    from flexmatch import KnowledgeBase, Principal

    kb, _ = cli_kb
    listed = json.loads(run("docs", "list", "--kb", str(kb), "--json").stdout)
    memo = next(r for r in listed if r["uri"].endswith("pdf_fake-memo.pdf"))
    with KnowledgeBase.open(kb) as opened:
        chunk_id = opened.get_document(memo["id"]).chunks[0].id
        ann = Principal(user="ann")
        kept = opened.add_feedback("who signed the memo?", chunk_id, principal=ann)
    shown = run("docs", "show", "--kb", str(kb), memo["id"]).stdout
    assert "[learned] who signed the memo?" in shown and "[content]" in shown
    assert "1× helpful, last by user:ann" in shown
    assert str(kept.learned_id) in "".join(shown.replace("│", "").split())
    gone = run("docs", "unlearn", "--kb", str(kb), str(kept.learned_id))
    assert gone.returncode == 0, gone.stderr
    assert "who signed the memo?" not in run("docs", "show", "--kb", str(kb), memo["id"]).stdout
    again = run("docs", "unlearn", "--kb", str(kb), str(kept.learned_id))
    assert again.returncode != 0 and "no learned matching text" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
