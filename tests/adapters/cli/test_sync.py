"""Deletions reach the index, through the real command: ``ingest --prune`` of a source
with ``paths``, and ``flexmatch sync`` over every source (skipped, failed, stopped)."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

from flexmatch.testing import FakeLLMServer
from tests.adapters.cli.test_interrupts import TOPICS, _interrupted
from tests.conftest import FLEXMATCH, llm_config, run, write_config

SOURCES = """\
default_source: docs
sources:
  docs:
    paths: [{paths}]
  facts:
    type: records
"""


def _folder(tmp_path: Path, texts: dict[str, str]) -> Path:
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    for name, text in texts.items():
        (notes / name).write_text(text)
    old = time.time() - 60  # not "just modified": the version hint is trusted
    for path in notes.iterdir():
        os.utime(path, (old, old))
    return notes


NOTES = {
    "tides.md": "# Tides\n\nHigh tide at the harbour is at noon.\n",
    "market.md": "# Market\n\nThe fish market opens at five on Fridays.\n",
    "ferry.md": "# Ferry\n\nThe ferry to the island leaves every hour.\n",
}


def _uris(kb: Path) -> list[str]:
    listed = run("docs", "list", "--kb", str(kb), "--json")
    assert listed.returncode == 0, listed.stderr
    return sorted(Path(r["uri"]).name for r in json.loads(listed.stdout))


def _found(kb: Path, text: str) -> list[str]:
    answer = run("query", "--kb", str(kb), "--json", text)
    assert answer.returncode == 0, answer.stderr
    return [Path(r["uri"]).name for r in json.loads(answer.stdout)["results"]]


def test_ingest_prune_removes_a_deleted_file_from_search_and_listings(tmp_path: Path) -> None:
    _folder(tmp_path, NOTES)
    kb = tmp_path / "kb"
    write_config(kb, SOURCES.format(paths="../notes"))
    first = run("ingest", "--kb", str(kb), "--source", "docs", "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["added"] == 3
    assert "market.md" in _found(kb, "when does the fish market open")

    (tmp_path / "notes" / "market.md").unlink()
    pruned = run("ingest", "--kb", str(kb), "--source", "docs", "--prune", "--json")
    assert pruned.returncode == 0, pruned.stderr
    report = json.loads(pruned.stdout)
    assert [Path(uri).name for uri in report["removed"]] == ["market.md"]
    assert report["unchanged"] == 2 and report["warnings"] == []
    assert _uris(kb) == ["ferry.md", "tides.md"]
    assert "market.md" not in _found(kb, "when does the fish market open")


def test_a_missing_configured_folder_prunes_nothing_and_says_why(tmp_path: Path) -> None:
    _folder(tmp_path, NOTES)
    kb = tmp_path / "kb"
    write_config(kb, SOURCES.format(paths="../notes, ../other"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "extra.md").write_text("# Extra\n\nAn extra note.\n")
    assert run("ingest", "--kb", str(kb), "--source", "docs").returncode == 0
    (tmp_path / "other" / "extra.md").unlink()
    (tmp_path / "other").rmdir()  # e.g. a share not mounted: its files are not gone
    (tmp_path / "notes" / "ferry.md").unlink()
    pruned = run("ingest", "--kb", str(kb), "--source", "docs", "--prune")
    assert pruned.returncode == 2  # the missing folder is a failure, named
    text = " ".join(pruned.stderr.split())
    assert f"not pruned: not listed: {tmp_path}/other: no such file or folder" in text
    assert _uris(kb) == ["extra.md", "ferry.md", "market.md", "tides.md"]


def test_an_emptied_configured_folder_prunes_nothing_and_names_it(tmp_path: Path) -> None:
    _folder(tmp_path, NOTES)
    share = tmp_path / "share"
    share.mkdir()
    (share / "extra.md").write_text("# Extra\n\nAn extra note.\n")
    kb = tmp_path / "kb"
    write_config(kb, SOURCES.format(paths="../notes, ../share"))
    assert run("sync", "--kb", str(kb), "--source", "docs").returncode == 0
    (share / "extra.md").unlink()  # an empty mount point: the share's files are not gone
    (tmp_path / "notes" / "ferry.md").unlink()
    synced = run("sync", "--kb", str(kb), "--source", "docs", "--json")
    assert synced.returncode == 0, synced.stderr
    warnings = json.loads(synced.stdout)["sources"][0]["report"]["warnings"]
    assert f"not pruned: {share}: no file listed, 1 documents stored under it" in warnings
    assert _uris(kb) == ["extra.md", "ferry.md", "market.md", "tides.md"]


def test_a_share_mounted_below_a_configured_folder_that_comes_up_empty_prunes_nothing(
    tmp_path: Path,
) -> None:
    _folder(tmp_path, NOTES)
    share = tmp_path / "notes" / "team" / "share"  # a mount point below the folder
    share.mkdir(parents=True)
    (share / "extra.md").write_text("# Extra\n\nAn extra note.\n")
    kb = tmp_path / "kb"
    write_config(kb, SOURCES.format(paths="../notes"))
    assert run("sync", "--kb", str(kb), "--source", "docs").returncode == 0
    (share / "extra.md").unlink()  # not mounted now: the share's files are not gone
    (tmp_path / "notes" / "ferry.md").unlink()
    synced = run("sync", "--kb", str(kb), "--source", "docs", "--json")
    assert synced.returncode == 0, synced.stderr
    report = json.loads(synced.stdout)["sources"][0]["report"]
    (warning,) = report["warnings"]  # the share, and the folder above that holds only it
    assert warning == (
        f"not pruned: {share}: no file listed, 1 documents stored under it; "
        f"{share.parent}: no file listed, 1 documents stored under it"
    )
    assert report["removed"] == []
    assert _uris(kb) == ["extra.md", "ferry.md", "market.md", "tides.md"]


def test_prune_keeps_documents_ingested_from_outside_the_configured_paths(
    tmp_path: Path,
) -> None:
    _folder(tmp_path, NOTES)
    other = tmp_path / "other"
    other.mkdir()
    (other / "extra.md").write_text("# Extra\n\nAn extra note.\n")
    kb = tmp_path / "kb"
    write_config(kb, SOURCES.format(paths="../notes"))
    assert run("ingest", "--kb", str(kb), "--source", "docs").returncode == 0
    assert run("ingest", "--kb", str(kb), "--source", "docs", str(other)).returncode == 0
    (tmp_path / "notes" / "ferry.md").unlink()
    synced = run("sync", "--kb", str(kb), "--source", "docs", "--json")
    assert synced.returncode == 0, synced.stderr
    removed = json.loads(synced.stdout)["sources"][0]["report"]["removed"]
    assert [Path(uri).name for uri in removed] == ["ferry.md"]
    assert _uris(kb) == ["extra.md", "market.md", "tides.md"]


def test_a_dry_run_prune_checks_as_the_real_run_and_lists_what_it_would_remove(
    tmp_path: Path,
) -> None:
    _folder(tmp_path, NOTES)
    kb = tmp_path / "kb"
    write_config(kb, SOURCES.format(paths="../notes"))
    with_inputs = ("ingest", "--kb", str(kb), "--prune", str(tmp_path / "notes"))
    for dry in (True, False):
        refused = run(*with_inputs, *(["--dry-run"] if dry else []))
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert "name no inputs with it" in " ".join(refused.stderr.split())
    assert run("ingest", "--kb", str(kb)).returncode == 0
    (tmp_path / "notes" / "ferry.md").unlink()
    dry = run("ingest", "--kb", str(kb), "--prune", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert [Path(uri).name for uri in json.loads(dry.stdout)["removed"]] == ["ferry.md"]
    assert _uris(kb) == ["ferry.md", "market.md", "tides.md"]  # nothing removed


def test_prune_of_a_source_without_paths_says_how_to_make_it_prunable(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write_config(kb, SOURCES.format(paths="../notes"))
    refused = run("ingest", "--kb", str(kb), "--source", "facts", "--prune")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    text = " ".join(refused.stderr.split())
    assert "source 'facts' (type 'records') cannot be pruned" in text
    assert "set sources.facts.paths" in text


def test_sync_brings_each_source_up_to_date_and_skips_one_that_cannot_list_itself(
    tmp_path: Path,
) -> None:
    notes = _folder(tmp_path, NOTES)
    kb = tmp_path / "kb"
    write_config(kb, SOURCES.format(paths="../notes"))
    first = run("sync", "--kb", str(kb))
    assert first.returncode == 0, first.stderr
    rows = {line.split()[0]: line.split() for line in first.stdout.splitlines() if line}
    assert rows["docs"][:4] == ["docs", "files", "done", "3"]
    assert rows["facts"][:3] == ["facts", "records", "skipped"]
    assert "facts skipped: nothing to list: set sources.facts.paths" in first.stderr

    (notes / "tides.md").write_text("# Tides\n\nHigh tide at the harbour is at two today.\n")
    (notes / "ferry.md").unlink()
    _folder(tmp_path, {"lighthouse.md": "# Lighthouse\n\nThe lighthouse is open on Sundays.\n"})
    second = run("sync", "--kb", str(kb), "--json")
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["tenant"] == "default" and report["ok"] is True
    docs, facts = report["sources"]
    assert set(docs) == {
        "name",
        "type",
        "started",
        "seconds",
        "outcome",
        "reason",
        "prune",
        "report",
    }
    assert (docs["name"], docs["type"], docs["outcome"], docs["prune"]) == (
        "docs",
        "files",
        "done",
        True,
    )
    ingested = docs["report"]
    assert (ingested["added"], ingested["changed"], ingested["unchanged"]) == (1, 1, 1)
    assert [Path(uri).name for uri in ingested["removed"]] == ["ferry.md"]
    assert ingested["texts_embedded"] > 0 and ingested["usage"]["calls"] == 0
    assert facts == {
        **facts,
        "outcome": "skipped",
        "reason": "nothing to list: set sources.facts.paths",
        "report": None,
    }
    assert _uris(kb) == ["lighthouse.md", "market.md", "tides.md"]
    assert "tides.md" in _found(kb, "high tide at two")


def test_one_failing_source_does_not_stop_the_others(tmp_path: Path) -> None:
    _folder(tmp_path, NOTES)
    (tmp_path / "facts.json").write_text(json.dumps([{"id": "f1", "title": "F", "text": "x"}]))
    kb = tmp_path / "kb"
    write_config(
        kb,
        "default_source: docs\nsources:\n"
        "  facts:\n    type: records\n    paths: [../facts.json]\n    template: nope\n"
        "  docs:\n    paths: [../notes]\n",
    )
    result = run("sync", "--kb", str(kb), "--json")
    assert result.returncode == 2, result.stderr
    facts, docs = json.loads(result.stdout)["sources"]
    assert (facts["name"], facts["outcome"], facts["report"]) == ("facts", "failed", None)
    assert facts["reason"].startswith("no prompt named 'nope'")
    assert docs["outcome"] == "done" and docs["report"]["added"] == 3
    assert "Traceback" not in result.stderr
    assert _uris(kb) == ["ferry.md", "market.md", "tides.md"]


def test_ctrl_c_during_sync_says_what_was_stored_pending_and_spent(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, topic in enumerate(TOPICS):
        (docs / f"{topic}.md").write_text(
            f"# The {topic}\n\nThe {topic} opens at {i + 6} o'clock every day.\n\n"
            f"## Staff\n\nThe {topic} employs {i + 3} people on weekdays.\n"
        )
    kb = tmp_path / "kb"
    write_config(kb, llm_config(llm_server, SOURCES.format(paths="../docs")))
    command = [str(FLEXMATCH), "sync", "--kb", str(kb)]
    env = {k: v for k, v in os.environ.items() if k != "FLEXMATCH_KB"}
    result = _interrupted(command, {**env, "COLUMNS": "200"}, llm_server, signal.SIGINT)
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr
    text = " ".join(result.stderr.split())
    stored = re.search(r"Interrupted\. Stored (\d+) documents", text)
    pending = re.search(r"Pending: (\d+) left mid-write .*?, (\d+) not reached", text)
    spent = re.search(r"Spent: (\d+) LLM calls \((\d+) from cache\), (\d+) tokens, \$", text)
    assert stored and pending and spent, text
    assert int(pending[1]) + int(pending[2]) > 0  # it really was cut short
    assert 1 <= int(spent[1]) <= llm_server.successful_calls()

    again = run("sync", "--kb", str(kb), "--json")  # the next run finishes the rest
    assert again.returncode == 0, again.stderr
    assert len(_uris(kb)) == len(TOPICS)


def test_a_sync_to_a_shared_store_drops_the_replicas_cached_answers(tmp_path: Path) -> None:
    """With a store server (``store.url``), the replicas of a running service cache answers
    per tenant generation: a sync from the command line bumps it, as a write through the
    service does, so what it removed leaves their caches at once."""
    from flexmatch.service import SharedState

    _folder(tmp_path, NOTES)
    kb = tmp_path / "kb"
    state = tmp_path / "state.sqlite"
    shared = f"store:\n  url: ':memory:'\nservice:\n  state_url: sqlite:///{state}\n"
    write_config(kb, shared + SOURCES.format(paths="../notes"))
    generations = SharedState.for_kb(kb).generations
    assert generations.current("acme") == 0
    result = run("sync", "--kb", str(kb), "--tenant", "acme", "--source", "docs")
    assert result.returncode == 0, result.stderr
    assert generations.current("acme") == 1 and generations.current("default") == 0
