"""Big documents are handled a slice of elements at a time (so no single C call holds the
GIL over all of them): the archive writes their JSON, and their text is joined, in slices;
what is written and joined must read back the same."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from flexmatch.engine.archive import ELEMENTS_A_SLICE, DocumentArchive, document_json
from flexmatch.engine.chains.chunker._budget import line_locations
from flexmatch.models import ELEMENTS_A_JOIN, Document, Element, Location


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
