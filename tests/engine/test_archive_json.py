"""The archive writes a document's JSON a slice of elements at a time (so no single call
holds the GIL over a huge document); what it writes must read back as the same document."""

from __future__ import annotations

import json

import pytest

from flexmatch.engine.archive import ELEMENTS_A_SLICE, DocumentArchive, document_json
from flexmatch.models import Document, Element, Location


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
