"""``parse_file`` and the parser registry as a whole: every sample document, the error
paths shared by all formats, and the package itself (all offline)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flexmatch.errors import (
    EmptyDocumentError,
    EncryptedDocumentError,
    ParseError,
    UnsupportedFormatError,
)
from flexmatch.inputs.parsing import PARSERS, SUPPORTED_SUFFIXES, parse_file
from flexmatch.models import ParsedDocument
from tests.conftest import REPO
from tests.inputs.parsing.samples import ALL_DOCS, DOCS, ENCRYPTED, IMAGE_ONLY

# --- every sample document ------------------------------------------------------------


def test_every_sample_suffix_is_supported() -> None:
    assert {p.suffix.lower() for p in ALL_DOCS} <= SUPPORTED_SUFFIXES


@pytest.mark.parametrize("path", ALL_DOCS, ids=[p.name for p in ALL_DOCS])
def test_sample_document_parses(path: Path) -> None:
    if path.name in ENCRYPTED:
        with pytest.raises(EncryptedDocumentError, match="encrypted") as info:
            parse_file(path)
        assert path.name in str(info.value)
        return
    doc = parse_file(path)
    if path.name in IMAGE_ONLY:
        assert doc.metadata["ocr_pages"] == [1] and doc.metadata["ocr_confidence"] > 80
    assert isinstance(doc, ParsedDocument)
    assert doc.text.strip()
    assert doc.title.strip()
    for element in doc.elements:
        assert element.text.strip(), element
        # a nested list item keeps the indent in front of its Markdown marker
        text = element.text.lstrip(" ") if element.kind == "list_item" else element.text
        assert text == text.strip()
        assert "  " not in text or element.kind == "code", element
        if element.kind == "heading":
            assert 1 <= element.level <= 6
        else:
            assert element.level == 0


# --- errors ---------------------------------------------------------------------------


def test_unsupported_suffix(tmp_path: Path) -> None:
    path = tmp_path / "data.xyz"
    path.write_bytes(bytes(range(256)) * 4)  # binary: no parser reads it
    with pytest.raises(UnsupportedFormatError, match=r"unsupported file type '\.xyz'") as info:
        parse_file(path)
    assert "data.xyz" in str(info.value)
    assert ".pdf" in str(info.value) and ".gz" in str(info.value)  # lists what is read


def test_unknown_suffix_holding_text_is_read_as_text(tmp_path: Path) -> None:
    path = tmp_path / "data.xyz"
    path.write_text("hello there", encoding="utf-8")
    assert parse_file(path).text == "hello there"


@pytest.mark.parametrize("name", ["empty.pdf", "empty.docx", "empty.txt", "empty.html"])
def test_zero_byte_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"")
    with pytest.raises(EmptyDocumentError, match="no text found") as info:
        parse_file(path)
    assert name in str(info.value)


@pytest.mark.parametrize("name", ["blank.txt", "blank.md", "blank.html"])
def test_whitespace_only_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("  \n\n \t\n", encoding="utf-8")
    with pytest.raises(EmptyDocumentError, match=name):
        parse_file(path)


@pytest.mark.parametrize("name", ["junk.txt", "junk.log", "junk.md", "junk.html", "junk.eml"])
def test_binary_junk_in_text_formats(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(random.Random(1).randbytes(4096))
    with pytest.raises(ParseError, match="looks like a binary file, not") as info:
        parse_file(path)
    assert name in str(info.value)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("corrupt.pdf", "PDF"),
        ("corrupt.docx", "Word"),
        ("corrupt.pptx", "PowerPoint"),
        ("corrupt.xlsx", "Excel"),
        ("corrupt.odt", "OpenDocument"),
    ],
)
def test_corrupt_file(tmp_path: Path, name: str, fmt: str) -> None:
    path = tmp_path / name
    path.write_bytes(random.Random(name).randbytes(2048))
    with pytest.raises(ParseError, match=f"could not parse {fmt}") as info:
        parse_file(path)
    assert type(info.value) is ParseError
    assert name in str(info.value)
    assert info.value.__cause__ is not None
    assert not isinstance(info.value.__cause__, ImportError | NameError | AttributeError)


def test_truncated_pdf(tmp_path: Path) -> None:
    path = tmp_path / "truncated.pdf"
    path.write_bytes((DOCS / "pdf_fake-memo.pdf").read_bytes()[:600])
    with pytest.raises(ParseError) as info:
        parse_file(path)
    assert "truncated.pdf" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r"missing\.pdf"):
        parse_file(tmp_path / "missing.pdf")


def test_suffix_is_case_insensitive(tmp_path: Path) -> None:
    path = tmp_path / "UPPER.DOCX"
    shutil.copy(DOCS / "simple.docx", path)
    assert parse_file(path).title == "These are a few of my favorite things:"


# --- package ---------------------------------------------------------------------------


def test_registry_matches_supported_suffixes() -> None:
    assert set(PARSERS) == SUPPORTED_SUFFIXES
    assert all(s.startswith(".") and s == s.lower() for s in SUPPORTED_SUFFIXES)


def test_import_is_lazy() -> None:
    heavy = ["pdfminer", "pypdf", "docx", "pptx", "openpyxl", "bs4", "odf", "striprtf"]
    code = (
        "import sys, flexmatch.inputs.parsing\n"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == ""
