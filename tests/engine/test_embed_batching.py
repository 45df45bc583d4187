"""Embeddings of concurrent documents are encoded together, in full batches."""

from __future__ import annotations

from pathlib import Path

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from tests.conftest import write_config


class CountingEmbedder:
    """The real model, recording the size of every batch it is asked to encode."""

    def __init__(self, model: OnnxEmbedder) -> None:
        self.model = model
        self.name = model.name
        self.batches: list[int] = []

    @property
    def dimension(self) -> int:
        return self.model.dimension

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        return self.model.embed(texts)


def test_documents_share_full_batches(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(24):
        sentences = " ".join(f"Fact {j} of note {i} is about the harbour." for j in range(6))
        (docs / f"note{i}.md").write_text(f"# Note {i}\n\n{sentences}\n")
    write_config(tmp_path / "kb", "sources:\n  default: {}\n")
    counting = CountingEmbedder(embedder)
    with KnowledgeBase.open(tmp_path / "kb", embedder=counting, env={}) as kb:
        report = kb.ingest([docs])
        found = kb.query("What is fact 3 of note 17 about?")
    assert report.added == 24 and sum(counting.batches) >= report.matching_texts
    # 24 documents of 7 texts each: far fewer encode calls than documents, big batches
    assert len(counting.batches) < 12 and max(counting.batches) >= 32, counting.batches
    assert found[0].title == "Note 17"
