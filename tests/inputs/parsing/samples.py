"""The sample documents (``tests/data/docs``) and small helpers for the parser tests
(import from here: ``conftest.py`` modules cannot be imported by name)."""

from __future__ import annotations

from flexmatch.inputs.parsing import parse_file
from flexmatch.models import Element, ParsedDocument
from tests.conftest import DOCS

ALL_DOCS = sorted(p for p in DOCS.iterdir() if p.is_file() and p.name != "MANIFEST.tsv")
ENCRYPTED = {"pdf_password.pdf"}
# Image-only PDFs: no text layer, read by OCR (the 'ocr' extra).
IMAGE_ONLY = {"pdf_single_table.pdf", "pdf_table-multi-row-column-cells.pdf"}


def parse_doc(name: str) -> ParsedDocument:
    """Parse one of the sample documents by file name."""
    return parse_file(DOCS / name)


def of_kind(doc: ParsedDocument, kind: str) -> list[Element]:
    return [e for e in doc.elements if e.kind == kind]


def headings(doc: ParsedDocument) -> list[tuple[int, str]]:
    return [(e.level, e.text) for e in doc.elements if e.kind == "heading"]
