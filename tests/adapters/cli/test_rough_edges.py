"""The CLI as a new user meets it, through the real ``flexmatch`` command: a folder that
is not a knowledge base, a knowledge base ``flexmatch serve`` holds, documents named by
an id prefix or a path, templates, prompts to edit, ``--version``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import flexmatch
from flexmatch.adapters.cli.app import app
from tests.adapters.cli.test_serve_lifecycle import _start, _stop, _wait_ready
from tests.adapters.http.servers import free_port
from tests.conftest import held_store, run, write_config

HARBOUR = "# Harbour\n\nThe ferry to Gull Island leaves at noon on Sundays.\n"
FEES = "# Fees\n\nA 12-metre yacht pays 40 euros a night in summer.\n"
RECORDS = [
    {"_id": "notice-tides", "title": "Tides", "text": "The sill gate closes at low water."},
    {"_id": "notice-fuel", "title": "Fuel", "text": "The fuel pontoon opens at eight."},
]


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The error a command printed: exit code 2, one line, no traceback."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    text = result.stderr.strip()
    assert "\n" not in text and "Traceback" not in text, text
    return text


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A knowledge base made by ``init`` holding two files and two records."""
    work = tmp_path_factory.mktemp("edges")
    docs = work / "docs"
    docs.mkdir()
    (docs / "harbour.md").write_text(HARBOUR, encoding="utf-8")
    (docs / "fees.md").write_text(FEES, encoding="utf-8")
    lines = "".join(json.dumps(r) + "\n" for r in RECORDS)
    (docs / "notices.jsonl").write_text(lines, encoding="utf-8")
    folder = work / "kb"
    assert run("init", str(folder)).returncode == 0
    ingested = run("ingest", "--kb", str(folder), str(docs))
    assert ingested.returncode == 0, ingested.stderr
    return folder


def test_a_folder_that_is_not_a_knowledge_base_is_refused_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    for command in (["query", "ferry"], ["stats"], ["docs", "list"], ["keys", "list"]):
        error = _one_line(run(*command, "--kb", str(missing)))
        assert str(missing) in error and "does not exist" in error
        assert f"flexmatch init {missing}" in error
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.md").write_text(HARBOUR, encoding="utf-8")
    error = _one_line(run("ingest", "--kb", str(empty), str(empty / "notes.md")))
    assert f"{empty} is not a knowledge-base folder" in error and "flexmatch init" in error
    assert sorted(p.name for p in empty.iterdir()) == ["notes.md"]  # no store made
    # the current folder is the default: the same, with $FLEXMATCH_KB unset
    error = _one_line(run("query", "ferry", cwd=empty))
    assert f"{empty} is not a knowledge-base folder" in error
    error = _one_line(run("serve", "--kb", str(empty), "--port", str(free_port())))
    assert "is not a knowledge-base folder" in error
    # init makes one that every command then accepts; the demo makes its own
    assert run("init", str(empty)).returncode == 0
    assert run("stats", "--kb", str(empty)).returncode == 0


def test_a_served_knowledge_base_answers_the_commands_through_the_server(tmp_path: Path) -> None:
    """``serve`` holds the store; each command goes through it (its socket), at once."""
    folder = tmp_path / "kb"
    # a lock wait far longer than a loaded machine's command run, so the two are told apart
    write_config(folder, "store:\n  lock_timeout: 200\n")
    (tmp_path / "harbour.md").write_text(HARBOUR, encoding="utf-8")
    assert run("ingest", "--kb", str(folder), str(tmp_path / "harbour.md")).returncode == 0
    document_id = json.loads(run("docs", "list", "--kb", str(folder), "--json").stdout)[0]["id"]
    port = free_port()
    server = _start(folder, port)
    try:
        _wait_ready(server, port)
        for command in (
            ["query", "ferry"],
            ["stats"],
            ["docs", "list"],
            ["docs", "show", document_id[:8]],
            ["ingest", str(tmp_path / "harbour.md")],
            ["docs", "remove", document_id],
        ):
            started = time.monotonic()
            done = run(*command, "--kb", str(folder))
            elapsed = time.monotonic() - started
            assert elapsed < 120, f"{command} waited {elapsed:.1f}s"  # never the lock wait
            assert done.returncode == 0, done.stderr
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).status_code == 200
        listed = run("docs", "list", "--kb", str(folder), "--json")
        assert json.loads(listed.stdout) == []  # the server removed it for the command
    finally:
        _stop(server)


def test_another_holder_is_named_after_the_wait(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    write_config(folder, "store:\n  lock_timeout: 1\n")
    (tmp_path / "harbour.md").write_text(HARBOUR, encoding="utf-8")
    assert run("ingest", "--kb", str(folder), str(tmp_path / "harbour.md")).returncode == 0
    with held_store(folder) as holder:
        error = _one_line(run("stats", "--kb", str(folder)))
        assert "in use by another FlexMatch process" in error
        assert f"pid {holder.pid}" in error and "waited 1s" in error


def test_docs_show_takes_an_id_prefix_a_path_or_a_record_id(kb: Path) -> None:
    records = json.loads(run("docs", "list", "--kb", str(kb), "--json").stdout)
    harbour = next(r for r in records if r["uri"].endswith("harbour.md"))

    def show(name: str) -> subprocess.CompletedProcess[str]:
        return run("docs", "show", "--kb", str(kb), name, "--json")

    for name in (harbour["id"], harbour["id"][:6], harbour["uri"]):
        result = show(name)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["document"]["id"] == harbour["id"]
    # a path as the user types it, relative to the current folder
    relative = run(
        "docs", "show", "--kb", str(kb), "harbour.md", "--json", cwd=Path(harbour["uri"]).parent
    )
    assert json.loads(relative.stdout)["document"]["id"] == harbour["id"]
    error = _one_line(show("notice-"))  # both records start so: each one named
    assert "names 2 documents" in error and "notice-tides" in error and "notice-fuel" in error
    assert json.loads(show("notice-t").stdout)["document"]["id"] == "notice-tides"
    error = _one_line(show("zz-nothing"))
    assert "no document 'zz-nothing'" in error


def test_docs_list_never_wraps_an_id_at_80_columns(kb: Path) -> None:
    listed = run("docs", "list", "--kb", str(kb), env={"COLUMNS": "80"})
    assert listed.returncode == 0, listed.stderr
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80
    records = json.loads(run("docs", "list", "--kb", str(kb), "--json").stdout)
    for record in records:
        assert record["id"] in listed.stdout  # whole, on one line


def test_init_lists_and_accepts_every_template(tmp_path: Path) -> None:
    listed = run("init", "--templates", env={"COLUMNS": "200"})
    assert listed.returncode == 0, listed.stderr
    templates = flexmatch.KnowledgeBase.templates()
    setups = Path(flexmatch.__file__).parent.parent / "configs" / "setups"
    assert {p.stem for p in setups.glob("*.yaml")} <= set(templates)
    for name in templates:
        assert name in listed.stdout
    error = _one_line(run("init", str(tmp_path / "x"), "--template", "setups"))
    offered = error.split("use one of ", 1)[1].split(", or the path", 1)[0].split(", ")
    assert offered == list(templates) and "setups" not in offered
    runner = CliRunner()
    for name in offered:  # every name the error offers is accepted, and validates
        made = runner.invoke(app, ["init", str(tmp_path / name), "--template", name])
        assert made.exit_code == 0, (name, made.output, made.exception)
        config = flexmatch.load_config(tmp_path / name)
        assert config.sources
    assert flexmatch.load_config(tmp_path / "code").sources["default"].chunker.chain == "code"
    assert "${FLEXMATCH_LLM:-}" in (tmp_path / "code" / "flexmatch.yaml").read_text()


def test_prompts_eject_copies_a_builtin_prompt_the_knowledge_base_then_uses(kb: Path) -> None:
    listed = run("prompts", "list", "--kb", str(kb))
    assert listed.returncode == 0 and "facts.md.j2" in listed.stdout, listed.stderr
    ejected = run("prompts", "eject", "facts", "--kb", str(kb))
    assert ejected.returncode == 0, ejected.stderr
    copy = kb / "prompts" / "facts.md.j2"
    builtin = Path(flexmatch.__file__).parent.parent / "prompts" / "facts.md.j2"
    assert copy.read_text() == builtin.read_text()
    copy.write_text("## Harbour facts (edited)\n" + copy.read_text(), encoding="utf-8")
    answered = run("query", "--kb", str(kb), "--markdown", "When does the ferry leave?")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.startswith("## Harbour facts (edited)")
    assert "prompts/facts.md.j2" in run("prompts", "list", "--kb", str(kb)).stdout
    error = _one_line(run("prompts", "eject", "facts.md.j2", "--kb", str(kb)))
    assert "already exists" in error and "--force" in error
    assert "(edited)" in copy.read_text()  # kept
    forced = run("prompts", "eject", "facts.md.j2", "--kb", str(kb), "--force")
    assert forced.returncode == 0 and copy.read_text() == builtin.read_text()
    error = _one_line(run("prompts", "eject", "../flexmatch", "--kb", str(kb)))
    assert "no built-in prompt" in error and "questions.j2" in error


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"flexmatch {flexmatch.__version__}"
