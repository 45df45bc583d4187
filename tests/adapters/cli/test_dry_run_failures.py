"""``ingest --dry-run`` through the real CLI lists what the real run would fail on, with
the reason the real run gives, counts what it would skip, and exits as it would (2)."""

from __future__ import annotations

import json
from pathlib import Path

from flexmatch.testing import FakeLLMServer
from tests.conftest import run


def test_dry_run_fails_what_the_real_run_fails(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    with (kb / "flexmatch.yaml").open("a", encoding="utf-8") as config:
        config.write("\ningest:\n  max_document_bytes: 2000\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nThe harbour opens at six.\n")
    (docs / "huge.md").write_text("# Huge\n\n" + "The harbour is large. " * 200)
    (docs / "photo.xyz").write_bytes(b"\x00\x01 not a format anyone reads")
    named = tmp_path / "notes.xyz"
    named.write_bytes(b"\x00\x01\x02 named on its own: meant, so it fails")
    inputs = [str(docs), str(named), str(tmp_path / "missing.md")]

    dry = run("ingest", "--kb", str(kb), "--dry-run", "--json", *inputs)
    assert dry.returncode == 2, dry.stderr
    estimate = json.loads(dry.stdout)
    assert estimate["documents"] == 1  # good.md, the one the real run stores
    # photo.xyz and huge.md (over the byte cap), passed over by the walk
    assert estimate["skipped"] == {"unsupported type": 1, "over the byte cap": 1}
    would_fail = {Path(f["uri"]).name: f["error"] for f in estimate["failed"]}
    assert set(would_fail) == {"notes.xyz", "missing.md"}
    assert "no such file or folder" in would_fail["missing.md"]
    assert "unsupported" in would_fail["notes.xyz"] and ".xyz" in would_fail["notes.xyz"]

    text = run("ingest", "--kb", str(kb), "--dry-run", *inputs, env={"COLUMNS": "400"})
    assert text.returncode == 2
    assert "1 documents" in text.stdout
    assert "would skip: 1 over the byte cap, 1 unsupported type" in text.stdout
    said = " ".join(text.stderr.split())
    for error in would_fail.values():
        assert f"would fail: {' '.join(error.split())}" in said

    env = {
        "FLEXMATCH_LLM": "openai/fake",
        "FLEXMATCH_LLM_API_BASE": llm_server.base_url,
        "FLEXMATCH_LLM_API_KEY": "k",
    }
    real = run("ingest", "--kb", str(kb), "--json", *inputs, env=env)
    assert real.returncode == 2, real.stderr
    report = json.loads(real.stdout)
    assert {Path(f["uri"]).name: f["error"] for f in report["failed"]} == would_fail
    assert report["added"] == estimate["documents"] and report["skipped"] == estimate["skipped"]
    assert report["warnings"] == [
        f"skipped {docs / 'huge.md'}: the file is 4,408 bytes, over the 2,000-byte cap "
        "(ingest.max_document_bytes)"
    ]


def test_dry_run_of_good_inputs_exits_0(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    page = tmp_path / "good.md"
    page.write_text("# Good\n\nThe harbour opens at six.\n")
    result = run("ingest", "--kb", str(kb), "--dry-run", str(page))
    assert result.returncode == 0, result.stderr
    assert "would fail" not in result.stderr
