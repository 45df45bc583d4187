"""Tenant text on the operator's terminal, through the real ``flexmatch`` command: Rich
markup and terminal escapes in key names, document ids, titles, chunks and errors are
shown as text, never obeyed."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.adapters.cli.output import shown
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore
from tests.conftest import run, write_config

# What a hostile tenant might store: a colour, a clipboard write (OSC 52), a screen clear,
# a carriage return that overwrites the line, a right-to-left override, and Rich markup.
HOSTILE = "ok\x1b[31mred\x1b]52;c;cGF5bG9hZA==\x07\x1b[2J\rgone\u202eevil [bold red]LOUD[/] [link=http://x]x[/link]"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_shown_as_text(output: str) -> None:
    assert not RAW.search(output), repr(output)  # nothing raw reaches the terminal
    flat = "".join(output.split())  # tables wrap long cells: compare without whitespace
    for visible in ("\\x1b[31mred", "\\x1b]52;c;", "\\x07", "\\x0dgone", "\\u202eevil"):
        assert visible in flat, (visible, output)
    assert "[boldred]LOUD[/]" in flat and "[link=http://x]x[/link]" in flat  # markup as text


def test_shown_writes_controls_visibly_and_escapes_markup() -> None:
    assert shown("\x1b[2J[red]x[/]") == "\\x1b[2J\\[red]x\\[/]"
    assert shown("a\nb\tc") == "a\\x0ab\\x09c"
    assert shown("a\nb\tc\rd", lines=True) == "a\nb\tc\\x0dd"
    assert shown("\u202eabc\u2066") == "\\u202eabc\\u2066"
    assert shown(42) == "42" and shown("plain text") == "plain text"


@pytest.fixture(scope="module")
def hostile_kb(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Path:
    kb_dir = tmp_path_factory.mktemp("terminal") / "kb"
    write_config(kb_dir, "sources:\n  default: {}\n")
    KeyStore.for_kb(kb_dir).create("acme", "read", "plain")
    # key names are checked now; one stored by an older version may still hold anything
    with sqlite3.connect(kb_dir / ".flexmatch" / "keys.sqlite") as db:
        db.execute("UPDATE api_keys SET name = ?", (HOSTILE,))
    corpus = kb_dir.parent / "corpus.jsonl"
    row = {"_id": "doc-" + HOSTILE, "title": HOSTILE, "text": f"Body {HOSTILE}\nsecond line"}
    corpus.write_text(json.dumps(row) + "\n")
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.ingest([corpus])
    assert report.added == 1, report.failed
    return kb_dir


def test_keys_list_shows_a_hostile_key_name_as_text(hostile_kb: Path) -> None:
    result = run("keys", "list", "--kb", str(hostile_kb), env={"COLUMNS": "400"})
    assert result.returncode == 0, result.stderr
    assert_shown_as_text(result.stdout)


def test_docs_list_and_show_show_hostile_text_as_text(hostile_kb: Path) -> None:
    listed = run("docs", "list", "--kb", str(hostile_kb), env={"COLUMNS": "400"})
    assert listed.returncode == 0, listed.stderr
    assert_shown_as_text(listed.stdout)
    detail = run("docs", "show", "doc-" + HOSTILE, "--kb", str(hostile_kb))
    assert detail.returncode == 0, detail.stderr
    assert_shown_as_text(detail.stdout)
    assert "second line" in detail.stdout  # a chunk's own lines stay lines


def test_an_error_quoting_hostile_text_shows_it_as_text(hostile_kb: Path) -> None:
    result = run("docs", "remove", "missing-" + HOSTILE, "--kb", str(hostile_kb))
    assert result.returncode != 0 and "no document" in result.stderr
    assert_shown_as_text(result.stderr)


def test_shown_is_the_only_way_cli_modules_escape_text() -> None:
    """One helper, shared by every command (the CLI's and those other adapters add): a
    module that escapes with Rich's ``escape`` alone would let control characters
    through again."""
    home = Path(shown.__code__.co_filename)
    package = home.parents[1]
    modules = [*(package / "adapters").rglob("*.py"), *(package / "service").glob("*.py")]
    assert len(modules) > 20
    for path in sorted(modules):
        if path != home:
            assert "rich.markup" not in path.read_text(encoding="utf-8"), path
