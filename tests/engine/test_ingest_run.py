"""The ingest run as a unit: the plan's size is known from the first progress call, and
the report accounts for every input."""

from __future__ import annotations

from pathlib import Path

from flexmatch import IngestReport, KnowledgeBase
from flexmatch.engine.embeddings import OnnxEmbedder
from tests.conftest import write_config


def test_progress_knows_the_plan_from_the_first_call(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"note{i}.md").write_text(f"# Note {i}\n\nThe note number {i} is here.\n")
    (docs / "corpus.jsonl").write_text(
        '{"_id": "c1", "text": "First line of the corpus."}\n'
        '{"_id": "c2", "text": "Second line of the corpus."}\n'
    )
    write_config(tmp_path / "kb", "sources:\n  default: {}\n")
    seen: list[tuple[int, int]] = []

    def progress(report: IngestReport) -> None:
        seen.append((report.planned, report.processed))

    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        report = kb.ingest([docs, tmp_path / "missing.md"], progress=progress)
    # 3 notes + 2 corpus lines + 1 missing path, known before anything is done
    assert seen[0] == (6, 0)
    assert all(planned == 6 for planned, _ in seen)
    assert seen[-1] == (6, 6)
    assert [done for _, done in seen] == sorted(done for _, done in seen)
    assert report.planned == 6 and report.added == 5 and len(report.failed) == 1
    assert "missing.md: no such file or folder" in report.failed[0].error
