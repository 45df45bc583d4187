"""Cost proportional to the change: an edited document re-embeds only its new matching
texts (the rest keep their stored vectors) and re-asks the LLM only for the chunks whose
inputs changed (the qualifying chain reads the document's outline and opening, not its
whole text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.testing import FakeLLMServer, HashEmbedder
from tests.conftest import llm_config, write_config


def sections(count: int = 20, edited: int | None = None) -> str:
    """A Markdown document of ``count`` sections; ``edited``: that one's body changed."""
    parts = ["# Field guide to the harbour\n\nHow the harbour works, section by section.\n"]
    for number in range(count):
        body = (
            f"Berth {number} takes ships of up to {number * 10 + 50} metres. "
            f"Pilots board berth {number} traffic at buoy {number + 3}. "
            f"Cargo for berth {number} is cleared at shed {number + 40}, where the "
            f"customs office keeps the manifests of the last {number + 2} weeks. "
            f"Fresh water and shore power at berth {number} are booked a day ahead."
        )
        if number == edited:
            body = body.replace("Pilots board", "Since March, tugs escort")
        parts.append(f"## Berth {number}\n\n{body}\n")
    return "\n".join(parts)


def _vectors_by_text(kb: KnowledgeBase) -> dict[str, list[float]]:
    found = kb.store.scroll_vectors("default", {"record": "match"})
    return {str(hit.payload["matched_text"]): vector for hit, vector in found}


def test_an_edit_embeds_only_the_new_texts(tmp_path: Path) -> None:
    page = tmp_path / "docs" / "guide.md"
    page.parent.mkdir()
    page.write_text(sections())
    embedder = HashEmbedder()
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        first = kb.ingest([page])
        before = _vectors_by_text(kb)
        page.write_text(sections(edited=7))
        embedded_before = embedder.texts
        second = kb.ingest([page])
        after = _vectors_by_text(kb)
    assert first.texts_embedded == first.matching_texts and first.texts_reused == 0
    assert second.changed == 1
    new_texts = set(after) - set(before)
    assert new_texts and all("tugs escort" in text for text in new_texts)
    assert second.texts_embedded == len(new_texts) == embedder.texts - embedded_before
    assert second.texts_reused == second.matching_texts - len(new_texts)
    # a reused vector is the stored one, written again: the store keeps float16 and
    # normalises what it is given, so a component may move by one float16 step (~2e-4)
    for text in set(after) & set(before):
        assert after[text] == pytest.approx(before[text], abs=1e-3)


def test_reuse_stays_within_the_document(tmp_path: Path) -> None:
    """A new document sharing texts with a stored one embeds its own: only the document's
    committed version lends vectors (its old points go when the new version commits)."""
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text(sections(3))
    b.write_text(sections(3).replace("Field guide", "Second guide"))
    with KnowledgeBase.open(tmp_path / "kb", embedder=HashEmbedder(), env={}) as kb:
        kb.ingest([a])
        report = kb.ingest([b])
    assert report.added == 1 and report.texts_reused == 0


def test_an_edit_re_asks_only_the_changed_chunk(tmp_path: Path) -> None:
    """Editing 1 section of 20: one group call per LLM chain (questions, context), each
    for that section's chunk only; every other chunk keeps its answers from the cache."""
    page = tmp_path / "guide.md"
    page.write_text(sections())
    with FakeLLMServer() as server:
        write_config(tmp_path / "kb", llm_config(server))
        with KnowledgeBase.open(tmp_path / "kb", embedder=HashEmbedder(), env={}) as kb:
            first = kb.ingest([page])
            contexts = {c.heading_path[-1]: c.qualifying_text for c in _chunks(kb)}
            calls = server.stats()["calls"]
            page.write_text(sections(edited=12))
            second = kb.ingest([page])
            edited_calls = server.stats()["calls"] - calls
            prompts = [r.body for r in server.requests[-edited_calls:]]
            after = {c.heading_path[-1]: c.qualifying_text for c in _chunks(kb)}
    assert first.usage.calls >= 4 and second.changed == 1
    assert edited_calls == second.usage.calls <= 2
    for body in prompts:  # each call asked about the edited chunk alone
        text = str(body)
        assert text.count('<chunk id="') == 1 and "tugs escort" in text
    assert after.keys() == contexts.keys()
    assert all(after[h] == contexts[h] for h in after if h != "Berth 12")


def test_a_new_heading_re_asks_every_context(tmp_path: Path) -> None:
    """The outline is part of every chunk's context: a section added changes what each
    chunk is part of, so every chunk's context is asked again (its questions are not)."""
    page = tmp_path / "guide.md"
    page.write_text(sections(6))
    with FakeLLMServer() as server:
        write_config(tmp_path / "kb", llm_config(server))
        with KnowledgeBase.open(tmp_path / "kb", embedder=HashEmbedder(), env={}) as kb:
            kb.ingest([page])
            calls = server.stats()["calls"]
            page.write_text(sections(6) + "\n## Opening hours\n\nThe gate opens at six.\n")
            kb.ingest([page])
            prompts = [str(r.body) for r in server.requests[calls:]]
    asked = sum(p.count('<chunk id="') for p in prompts if "<outline>" in p)
    assert asked == 8  # the lead, the six berths and the new section


def _chunks(kb: KnowledgeBase) -> list:  # type: ignore[type-arg]
    (record,) = kb.list_documents()
    detail = kb.get_document(record.id)
    assert detail is not None
    return detail.chunks


def test_the_server_store_lends_vectors_too(tmp_path: Path) -> None:
    """The same reuse over the Qdrant server store (qdrant-client's in-process engine)."""
    from flexmatch.testing import memory_knowledge_base

    page = tmp_path / "guide.md"
    page.write_text(sections(4))
    with memory_knowledge_base(tmp_path / "kb") as kb:
        kb.ingest([page])
        page.write_text(sections(4, edited=2))
        report = kb.ingest([page])
    assert report.changed == 1 and report.texts_reused > 0
    assert report.texts_embedded + report.texts_reused == report.matching_texts
    assert 0 < report.texts_embedded <= 3
