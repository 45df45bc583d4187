"""Big documents are handled a slice of elements at a time (so no single C call holds the
GIL over all of them): the archive writes their JSON, and their text is joined, in slices;
what is written and joined must read back the same."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.archive import ELEMENTS_A_SLICE, DocumentArchive, document_json
from flexmatch.engine.chains import Chunker, register
from flexmatch.engine.chains.chunker._budget import line_locations
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.ingest.embed import prepare
from flexmatch.models import ELEMENTS_A_JOIN, Document, Element, Location, Section
from tests.conftest import write_config


@pytest.mark.parametrize(
    "count", [0, 1, ELEMENTS_A_SLICE - 1, ELEMENTS_A_SLICE, 2 * ELEMENTS_A_SLICE + 1]
)
def test_sliced_json_is_the_documents_json(count: int) -> None:
    elements = [
        Element(
            kind="code" if i % 2 else "heading",
            text=f'piece {i} "quoted" ü',
            level=i % 3,
            location=Location(line_start=i + 1),
        )
        for i in range(count)
    ]
    document = Document(
        id="d",
        uri="file.js",
        source="default",
        title="t",
        elements=elements,
        metadata={"nested": [1, {"z": None}], "ok": True},
    )
    written = document_json(document)
    assert json.loads(written) == json.loads(document.model_dump_json())
    assert Document.model_validate_json(written) == document


def test_the_archive_reads_back_what_it_wrote(tmp_path) -> None:
    archive = DocumentArchive(tmp_path / "archive")
    elements = [Element(kind="paragraph", text=f"p{i}") for i in range(ELEMENTS_A_SLICE + 5)]
    document = Document(id="d", uri="u", source="s", title="t", elements=elements)
    archive.put("tenant", document)
    assert archive.get("tenant", "d") == document


@pytest.mark.parametrize(
    "count", [0, 1, ELEMENTS_A_JOIN, ELEMENTS_A_JOIN + 1, 3 * ELEMENTS_A_JOIN + 7]
)
def test_a_documents_text_joined_in_slices_is_its_whole_text(count: int) -> None:
    elements = [Element(kind="paragraph", text=f"paragraph {i}") for i in range(count)]
    document = Document(id="d", uri="u", source="s", title="t", elements=elements)
    assert document.text == "\n\n".join(e.text for e in elements)


def test_line_locations_of_many_pieces_are_exact_and_linear() -> None:
    """200,000 lines cut into 10,000 pieces: each piece's lines exact, in well under the
    minutes the count from the text's start for every piece took."""
    lines = [f"line {i}" for i in range(200_000)]
    text = "\n".join(lines)
    pieces = ["\n".join(lines[i : i + 20]) for i in range(0, len(lines), 20)]
    started = time.perf_counter()
    found = line_locations(text, pieces, Location(line_start=5))
    assert time.perf_counter() - started < 10
    for index in (0, 1, 4_999, len(pieces) - 1):
        where = found[index]
        assert where is not None
        assert (where.line_start, where.line_end) == (5 + 20 * index, 5 + 20 * index + 19)


def test_a_big_documents_vectors_are_reused_from_the_server_store_past_one_page(
    tmp_path: Path,
) -> None:
    """The Qdrant server store lends a document's stored vectors a page of 1,000 at a time:
    a second page must come back too (a changed document of thousands of texts re-embeds
    only what changed)."""
    from flexmatch.testing import memory_knowledge_base

    def page(edited: int | None = None) -> str:
        return "\n\n".join(
            f"## Part {i}\n\nThe harbour note number {i} says {'CHANGED' if i == edited else 'ok'}."
            for i in range(3_000)
        )

    path = tmp_path / "big.md"
    path.write_text(page(), encoding="utf-8")
    with memory_knowledge_base(tmp_path / "kb") as kb:
        first = kb.ingest([path])
        assert first.matching_texts > 1_000
        path.write_text(page(edited=7), encoding="utf-8")
        report = kb.ingest([path])
    assert report.changed == 1
    assert report.texts_reused > 1_000


@register("chunker", "test_each_element")
class _EachElement(Chunker):
    """One section per element: a big document's tens of thousands of chunks, at once."""

    async def run(self, document: Document) -> list[Section]:
        return [Section(text=element.text) for element in document.elements]


def test_a_big_documents_texts_meet_their_vectors_off_the_event_loop(
    tmp_path: Path, embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Matching 100,000 texts to their vectors (the known ones, those still to embed, the
    vectors in order) is passes over every text: on the event loop they held a server's
    other requests for 85 ms of CPU at a time (the 5 MB script's 48,000 texts; here 126
    ms). Measured in the loop thread's CPU time, which a busy machine does not inflate."""
    count = 100_000
    longest: list[float] = [0.0]
    run = asyncio.events.Handle._run

    def timed(handle: asyncio.events.Handle) -> None:  # the test's loop (chains have their own)
        if threading.current_thread() is not threading.main_thread():
            return run(handle)
        started = time.thread_time()
        try:
            run(handle)
        finally:
            longest[0] = max(longest[0], time.thread_time() - started)

    async def embed(texts: list[str]) -> list[list[float]]:  # on a thread, as an embedder's
        return await asyncio.to_thread(lambda: [[float(len(text))] for text in texts])

    elements = [Element(kind="paragraph", text=f"paragraph {i}") for i in range(count)]
    document = Document(id="d", uri="big.txt", source="default", title="t", elements=elements)
    write_config(tmp_path / "kb", "sources:\n  default:\n    chunker: each-element\n")
    (tmp_path / "kb" / "chains").mkdir()
    (tmp_path / "kb" / "chains" / "each-element.yaml").write_text(
        "kind: chunker\ntype: test_each_element\n"
    )
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        chains = kb.source_chains("default")
        monkeypatch.setattr(asyncio.events.Handle, "_run", timed)
        gc.disable()  # a server's collector is quiet (``quiet_collector``): not measured here
        try:
            enriched = asyncio.run(prepare(document, chains, embed))
        finally:
            gc.enable()
    assert len(enriched.chunks) == count
    texts = [m.text for chunk in enriched.chunks for m in chunk.matching_texts]
    assert enriched.vectors == [[float(len(text))] for text in texts]
    assert longest[0] < 0.05, f"a loop callback ran {longest[0] * 1000:.0f} ms of CPU"
