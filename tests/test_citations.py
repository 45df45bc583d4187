"""Where results point, end to end: a man page is cited by its section, an HTML page
without ids by its headings, a plain-text README by the lines under its underlined
headings; and a knowledge base written before these citations gets them at its next
sync, though no file changed."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.chains.chunker import _budget
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.inputs.parsing import text
from flexmatch.inputs.sources import validators
from tests.conftest import run, write_config
from tests.engine.chains.test_locations import MAN_PAGE, NO_IDS, README

needs_groff = pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")


def _folder(root: Path) -> Path:
    folder = root / "docs"
    folder.mkdir()
    (folder / "demo.8.gz").write_bytes(gzip.compress(MAN_PAGE.encode("utf-8")))
    (folder / "guide.html").write_text(NO_IDS, encoding="utf-8")
    (folder / "README").write_text(README, encoding="utf-8")
    return folder


@needs_groff
def test_query_json_cites_the_section_of_a_man_page_and_an_html_heading(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write_config(kb, "sources:\n  default: {}\n")
    done = run("ingest", "--kb", str(kb), str(_folder(tmp_path)))
    assert done.returncode == 0, done.stderr

    def first_cite(question: str) -> str:
        answer = run("query", question, "--kb", str(kb), "--json", "--top-n", "1")
        assert answer.returncode == 0, answer.stderr
        return str(json.loads(answer.stdout)["results"][0]["cite"])

    assert first_cite("What exit status means torn records were left?") == "demo(8) › EXIT CODES"
    assert first_cite("How do I install the ledger on Linux?") == "guide.html › Install › On Linux"
    assert first_cite("Where do I unpack the ledger archive?") in (
        "README:8-11",
        "guide.html › Install",
    )


@needs_groff
def test_a_sync_reads_again_what_older_parsers_read_though_no_file_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: OnnxEmbedder
) -> None:
    """A knowledge base written by the parsers and chunkers before (no sections, no
    underlined headings) is brought up to date by its next sync: the unchanged files are
    read again and chunked again, and their results cite their sections."""
    folder = _folder(tmp_path)
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, f"sources:\n  default:\n    paths: [{folder}]\n")
    with monkeypatch.context() as old:  # the parsers and chunkers of before
        old.setattr(validators, "PARSER_REVISION", 0)
        old.setattr(_budget, "REVISION", 4)
        old.setattr(text, "_underlined", lambda block: None)
        old.setattr("flexmatch.inputs.parsing.man.Location", lambda section: None)
        with KnowledgeBase.open(kb_dir, embedder=embedder) as kb:
            kb.sync()
            before = kb.query("What exit status means torn records were left?", top_n=1)
            assert before[0].cite == "demo.8.gz"
            again = kb.sync()
            assert again.sources[0].report is not None
            assert again.sources[0].report.unchanged == 3  # nothing read again
    with KnowledgeBase.open(kb_dir, embedder=embedder) as kb:
        report = kb.sync().sources[0].report
        assert report is not None and report.changed == 3 and report.unchanged == 0
        after = kb.query("What exit status means torn records were left?", top_n=1)
        assert after[0].cite == "demo(8) › EXIT CODES"
        readme = kb.query("Where do I unpack the ledger archive?", top_n=5)
        assert ["Harbour ledger", "Installing"] in [r.heading_path for r in readme]
        settled = kb.sync().sources[0].report
        assert settled is not None and settled.unchanged == 3 and settled.changed == 0
