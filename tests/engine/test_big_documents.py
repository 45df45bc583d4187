"""Big documents are handled a slice of elements at a time (so no single C call holds the
GIL over all of them): the archive writes their JSON, and their text is joined, in slices;
what is written and joined must read back the same."""

from __future__ import annotations

import json

import pytest

from flexmatch.engine.archive import ELEMENTS_A_SLICE, DocumentArchive, document_json
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
