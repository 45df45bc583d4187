"""How a file was named never enters its version, and a knowledge base whose versions
were made when it did (a walked file's ``path`` counted) is not re-indexed for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.chains.sources import SourceChains
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.ingest import commit, version_of
from flexmatch.models import Document
from tests.engine.samples import HARBOUR, match_points, write


def _made_before(document: Document, chains: SourceChains) -> str:
    """The version a document got when its place in a walked folder counted."""
    return version_of(document.content_hash, document.metadata, chains, named=True)


def test_versions_made_when_the_place_counted_stay_unchanged(
    tmp_path: Path, embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = write(tmp_path / "docs" / "guide", "harbour.md", HARBOUR)
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        with monkeypatch.context() as before:  # a knowledge base made then
            before.setattr(commit, "document_version", _made_before)
            assert kb.ingest([tmp_path / "docs"]).added == 1
        (record,) = kb.list_documents()
        old = record.version
        assert old != version_of(
            record.content_hash, record.metadata, kb.source_chains(record.source)
        )
        # the same place, the file named, another root: unchanged each time, nothing redone
        for target in [tmp_path / "docs", page, tmp_path / "docs" / "guide", page]:
            report = kb.ingest([target])
            assert (report.unchanged, report.changed, report.added) == (1, 0, 0), target
        plan = kb.run_sync(kb.areindex_plan())
        (record,) = kb.list_documents()
        assert plan.stale == []
        assert record.version == old
        assert record.metadata["path"] == "guide/harbour.md"  # the place its version holds
        assert {p["version"] for p in match_points(kb)} == {old}
        hits = kb.search("harbour")
        assert hits.results and hits.results[0].document_id == record.id
