"""Through the real CLI: ``ingest --json`` says how many matching texts an edit embedded
and how many kept their stored vectors, and ``ingest`` prints it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run


def _page(edited: bool = False) -> str:
    sections = []
    for number in range(6):
        text = f"Berth {number} takes ships of up to {number * 10 + 50} metres."
        if edited and number == 3:
            text = "Berth 3 is closed for dredging until June."
        sections.append(f"## Berth {number}\n\n{text} Pilots board at buoy {number}.\n")
    return "# Harbour guide\n\n" + "\n".join(sections)


def test_ingest_reports_texts_embedded_and_reused(tmp_path: Path) -> None:
    page = tmp_path / "guide.md"
    page.write_text(_page())
    kb = str(tmp_path / "kb")
    made = run("init", kb, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    first = run("ingest", "--kb", kb, "--json", str(page), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    added = json.loads(first.stdout)
    assert added["texts_embedded"] == added["matching_texts"] and added["texts_reused"] == 0
    page.write_text(_page(edited=True))
    second = run("ingest", "--kb", kb, "--json", str(page), cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    changed = json.loads(second.stdout)
    assert changed["changed"] == 1
    # the edited section's chunk text and its first sentence are new; the rest is reused
    assert changed["texts_embedded"] == 2
    assert changed["texts_reused"] == changed["matching_texts"] - 2
    page.write_text(_page())
    shown = run("ingest", "--kb", kb, str(page), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "Embedded 2 matching texts;" in shown.stdout
    assert "unchanged ones kept their stored vectors" in shown.stdout
