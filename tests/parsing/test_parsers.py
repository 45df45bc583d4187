"""Parsers against the shared sample documents, plus the error paths (all offline)."""

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
from flexmatch.models import Element, ParsedDocument
from flexmatch.parsing import (
    PARSERS,
    SUPPORTED_SUFFIXES,
    parse_file,
    parse_html_bytes,
    parse_text,
)

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO.parent / "shared" / "data" / "docs"
if not DOCS.is_dir():  # CI has ../shared beside the clone: a missing copy must fail loudly
    pytest.fail(f"sample documents not found at {DOCS}", pytrace=False)

ALL_DOCS = sorted(p for p in DOCS.iterdir() if p.is_file() and p.name != "MANIFEST.tsv")
ENCRYPTED = {"pdf_password.pdf"}
# Image-only PDFs: no text layer, and OCR is out of scope.
IMAGE_ONLY = {"pdf_single_table.pdf", "pdf_table-multi-row-column-cells.pdf"}


def _parse(name: str) -> ParsedDocument:
    return parse_file(DOCS / name)


def _of_kind(doc: ParsedDocument, kind: str) -> list[Element]:
    return [e for e in doc.elements if e.kind == kind]


def _headings(doc: ParsedDocument) -> list[tuple[int, str]]:
    return [(e.level, e.text) for e in doc.elements if e.kind == "heading"]


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
    if path.name in IMAGE_ONLY:
        with pytest.raises(EmptyDocumentError, match="no text found") as info:
            parse_file(path)
        assert path.name in str(info.value)
        return
    doc = parse_file(path)
    assert isinstance(doc, ParsedDocument)
    assert doc.text.strip()
    assert doc.title.strip()
    for element in doc.elements:
        assert element.text.strip(), element
        assert element.text == element.text.strip()
        assert "  " not in element.text or element.kind == "code", element
        if element.kind == "heading":
            assert 1 <= element.level <= 6
        else:
            assert element.level == 0


# --- content, format by format --------------------------------------------------------


def test_html_cp1252_is_decoded() -> None:
    doc = _parse("fake-html-cp1252.html")
    text = doc.text
    for word in ("schöne", "köstlich", "été", "niño", "señora", "João", "åt", "15,50 €"):
        assert word in text
    assert "\ufffd" not in text
    assert doc.title == "My First Heading"
    code = _of_kind(doc, "code")
    assert len(code) == 1 and "\n" in code[0].text  # <pre> keeps its lines


def test_html_structure() -> None:
    doc = _parse("fake-html.html")
    assert _headings(doc) == [
        (1, "My First Heading"),
        (2, "My Second Heading"),
        (3, "A Third Heading"),
    ]
    assert [e.text for e in _of_kind(doc, "list_item")] == [
        "A test list",
        "With sub-bullets!",
        "And another",
        "Back at the root",
    ]
    (table,) = _of_kind(doc, "table")
    assert table.text.splitlines() == [
        "Column 1 | Column 2",
        "Row 1, Cell 1 | Row 1, Cell 2",
        "Row 2, Cell 1 | Row 2, Cell 2",
    ]


def test_html_drops_header_and_footer() -> None:
    doc = _parse("fake-html-with-footer-and-header.html")
    assert "My first paragraph." in doc.text
    assert "Header" not in doc.text and "Footer" not in doc.text


def test_html_10k_tables_and_text() -> None:
    doc = _parse("example-10k-1p.html")
    assert any("Common stock | GLXZ | OTCQB marketplace" in t.text for t in _of_kind(doc, "table"))
    assert "Commission file number: 000-30653" in doc.text
    assert doc.title == "example-10k-1p"  # empty <title>, no <h1>: falls back to the stem


def test_parse_html_bytes_uses_declared_charset() -> None:
    html = '<html><head><meta charset="iso-8859-1"><title>Caf\u00e9</title></head>'
    html += "<body><script>var x = 1;</script><div>Cr\u00e8me br\u00fbl\u00e9e \u20ac5</div>"
    html += "<ul><li>Item <b>one</b></li></ul></body></html>"
    doc = parse_html_bytes(html.encode("cp1252"), base_title="fallback")
    assert doc.title == "Café"
    assert [e.kind for e in doc.elements] == ["paragraph", "list_item"]
    assert doc.elements[0].text == "Crème brûlée €5"
    assert doc.elements[1].text == "Item one"
    assert "var x" not in doc.text


def test_parse_html_bytes_title_fallback_and_empty() -> None:
    assert parse_html_bytes(b"<p>Just text</p>", base_title="Page").title == "Page"
    with pytest.raises(EmptyDocumentError, match="Page: no text found"):
        parse_html_bytes(b"<html><body><script>x()</script></body></html>", base_title="Page")


def test_docx_headings_and_lists() -> None:
    doc = _parse("simple.docx")
    assert _headings(doc) == [(1, "These are a few of my favorite things:")]
    assert doc.title == "These are a few of my favorite things:"
    items = [e.text for e in _of_kind(doc, "list_item")]
    assert "Hockey" in items  # "List Bullet" style
    assert "Parrots" in items  # a typed "• " bullet
    assert "This is my third thought." in doc.text


def test_docx_numbered_paragraphs_are_list_items() -> None:
    doc = _parse("example-list-items-multiple.docx")
    items = [e.text for e in _of_kind(doc, "list_item")]
    assert len(items) == 10
    assert "Trying more lists." in items
    assert "Lorem Ipsum 2" in [e.text for e in _of_kind(doc, "paragraph")]


def test_docx_tables_in_document_order() -> None:
    doc = _parse("docx-tables.docx")
    kinds = [e.kind for e in doc.elements]
    assert kinds == ["paragraph", "table"] * 3
    simple, nested, merged = _of_kind(doc, "table")
    assert simple.text == "Header Col 1 | Header Col 2\nLorem ipsum | A link example"
    assert "[e | f; g&t | h]" in nested.text
    assert merged.text.splitlines()[0] == "a | b"  # a horizontally merged cell appears once


def test_docx_table_before_paragraphs() -> None:
    doc = _parse("fake_table.docx")
    assert [e.kind for e in doc.elements] == ["table", "paragraph"]
    assert doc.elements[0].text.startswith("Header Col 1 | Header Col 2")


def test_markdown_headings_and_code() -> None:
    doc = _parse("codeblock.md")
    assert _headings(doc) == [(2, "HTML Example"), (2, "XML Example")]
    code = _of_kind(doc, "code")
    assert len(code) == 3
    assert code[0].text.startswith("<!DOCTYPE html>\n<html")
    assert "    <to>Tove</to>" in code[1].text  # indentation kept
    assert doc.title == "codeblock"  # no h1


def test_markdown_plain_text_licence() -> None:
    doc = _parse("LICENSE-Apache-2.0.md")
    assert "Grant of Copyright License" in doc.text
    assert not _of_kind(doc, "code")  # indented paragraphs are not code
    assert any(e.text.startswith("2. Grant of Copyright License") for e in doc.elements)


def test_markdown_tables_lists_and_front_matter(tmp_path: Path) -> None:
    path = tmp_path / "notes.markdown"
    path.write_text(
        "---\ntitle: Front Title\n---\n# Big\n\nSome *emphasis* and [a link](http://x).\n\n"
        "- one\n- two\n\n| A | B |\n|---|---|\n| 1 | 2 |\n",
        encoding="utf-8",
    )
    doc = parse_file(path)
    assert doc.title == "Front Title"
    assert [(e.kind, e.text) for e in doc.elements] == [
        ("heading", "Big"),
        ("paragraph", "Some emphasis and a link."),
        ("list_item", "one"),
        ("list_item", "two"),
        ("table", "A | B\n1 | 2"),
    ]


def test_xlsx_rows_rendered_with_headers() -> None:
    doc = _parse("stanley-cups.xlsx")
    assert _headings(doc) == [(1, "Stanley Cups"), (1, "Stanley Cups Since 67")]
    first, second = _of_kind(doc, "table")
    assert "Team: Maple Leafs; Location: TOR; Stanley Cups: 13" in first.text.splitlines()
    assert "Team: Maple Leafs; Location: TOR; Stanley Cups: 0" in second.text.splitlines()
    assert "Team: Blues; Location: STL; Stanley Cups: 1" in first.text.splitlines()
    assert doc.metadata["sheets"] == ["Stanley Cups", "Stanley Cups Since 67"]


def test_pptx_slide_titles_bullets_and_pages() -> None:
    doc = _parse("fake-power-point.pptx")
    assert doc.elements[0] == Element(kind="heading", text="Adding a Bullet Slide", level=1, page=1)
    items = [e.text for e in _of_kind(doc, "list_item")]
    assert "Find the bullet slide layout" in items
    assert "Use _TextFrame.add_paragraph() for subsequent bullets" in items
    assert "Here is some text in a text box!" in [e.text for e in _of_kind(doc, "paragraph")]

    deck = _parse("sample-presentation.pptx")
    assert [h for h in _headings(deck)][:2] == [
        (1, "Title Slide"),
        (1, "This is the first content slide"),
    ]
    assert {e.page for e in deck.elements} == {1, 2, 3, 4}
    assert any("1 | A1 | B1 | C1" in t.text for t in _of_kind(deck, "table"))


def test_pptx_table() -> None:
    doc = _parse("fake-power-point-table.pptx")
    (table,) = _of_kind(doc, "table")
    assert table.text.splitlines()[1] == "Red | Green | Blue"
    assert table.page == 1


def test_eml_subject_headers_and_body() -> None:
    doc = _parse("fake-email.eml")
    assert doc.title == "Test Email"
    assert doc.metadata["from"] == "Matthew Robinson <mrobinson@unstructured.io>"
    assert "NotMatthew@notunstructured.com" in doc.metadata["to"]
    assert "2022" in doc.metadata["date"]
    assert doc.metadata["attachments"] == []
    assert [e.text for e in _of_kind(doc, "list_item")] == ["Roses are red", "Violets are blue"]
    assert "<div" not in doc.text  # the plain part was used


def test_eml_attachments_are_listed_not_parsed() -> None:
    doc = _parse("eml_fake-email-attachment.eml")
    assert doc.title == "Fake email with attachment"
    assert doc.metadata["attachments"] == ["fake-attachment.txt"]
    assert "fake attachment" not in doc.text
    assert "Here's the attachments!" in doc.text


def test_eml_html_only_body(tmp_path: Path) -> None:
    path = tmp_path / "html-only.eml"
    path.write_bytes(
        b"Subject: Hello\r\nFrom: a@example.com\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: text/html; charset="utf-8"\r\n\r\n'
        b"<html><body><h1>News</h1><p>Caf\xc3\xa9 opens</p></body></html>\r\n"
    )
    doc = parse_file(path)
    assert doc.title == "Hello"
    assert [(e.kind, e.text) for e in doc.elements] == [
        ("heading", "News"),
        ("paragraph", "Café opens"),
    ]


def test_odt_paragraph_and_table() -> None:
    doc = _parse("fake.odt")
    assert doc.elements[0] == Element(kind="paragraph", text="Lorem ipsum dolor sit amet.")
    (table,) = _of_kind(doc, "table")
    assert "Color | Blue | Red | Green" in table.text.splitlines()


def test_rtf_paragraphs_and_table() -> None:
    doc = _parse("fake-doc.rtf")
    assert "My first paragraph." in [e.text for e in _of_kind(doc, "paragraph")]
    (table,) = _of_kind(doc, "table")
    assert table.text.splitlines() == [
        "Column 1 | Column 2",
        "Row 1, Cell 1 | Row 1, Cell 2",
        "Row 2, Cell 1 | Row 2, Cell 2",
    ]


def test_pdf_headings_by_font_size() -> None:
    doc = _parse("pdf_DA-1p.pdf")
    headings = _headings(doc)
    assert headings[:2] == [(1, "MAIN GAME"), (2, "CREATURES")]  # 16 pt and 14 pt on 12 pt
    assert (3, "Abomination") in headings  # bold at body size: one level further down
    assert doc.title == "MAIN GAME"  # no metadata title
    paragraphs = _of_kind(doc, "paragraph")
    assert len(paragraphs) >= 8
    assert all(e.page == 1 for e in doc.elements)
    assert any(p.text.startswith("Thankfully, abominations are rare.") for p in paragraphs)


def test_pdf_metadata_title_bullets_and_pages() -> None:
    doc = _parse("pdf_list-item-example.pdf")
    assert doc.title == "Unstructured-test-doc"
    items = [e.text for e in _of_kind(doc, "list_item")]
    assert "What are product types?" in items
    assert "What challenges may arise in development?" in items  # wrapped box joined
    assert {e.page for e in doc.elements} == {1, 2}
    assert doc.metadata["pages"] == 2


def test_pdf_pages_are_numbered() -> None:
    doc = _parse("pdf_fake-memo-with-duplicate-page.pdf")
    assert [e.page for e in doc.elements if e.text == "Mallori"] == [1, 2]
    assert doc.title == "pdf_fake-memo-with-duplicate-page"  # no metadata title, no heading


def test_pdf_rotated_page_gives_text() -> None:
    doc = _parse("rotated-page-90.pdf")
    assert [e.text for e in doc.elements] == [
        "Hello World Test Text",
        "Second line of text here",
        "Rotated page fixture",
    ]


# --- plain text and parse_text --------------------------------------------------------


def test_text_file_paragraphs_lists_and_cp1252(tmp_path: Path) -> None:
    path = tmp_path / "notes.TXT"
    path.write_bytes(
        "First   paragraph\nwraps here.\n\n  \nCaf\u00e9 costs \u20ac3:\n- tea\n- coffee\n".encode(
            "cp1252"
        )
    )
    doc = parse_file(path)
    assert doc.title == "notes"
    assert [(e.kind, e.text) for e in doc.elements] == [
        ("paragraph", "First paragraph wraps here."),
        ("paragraph", "Café costs €3:"),
        ("list_item", "tea"),
        ("list_item", "coffee"),
    ]


def test_parse_text_plain() -> None:
    doc = parse_text("One  line\n\ttwo\n\n\nSecond para", title="T")
    assert doc.title == "T"
    assert [e.text for e in doc.elements] == ["One line two", "Second para"]
    assert all(e.kind == "paragraph" for e in doc.elements)


def test_parse_text_markdown_headings() -> None:
    doc = parse_text("# Guide\n\nIntro.\n\n## Setup\n\nRun it.")
    assert doc.title == "Guide"
    assert _headings(doc) == [(1, "Guide"), (2, "Setup")]
    assert parse_text("# Guide\n\nIntro.", title="Given").title == "Given"


def test_parse_text_empty() -> None:
    with pytest.raises(EmptyDocumentError):
        parse_text(" \n\t\n")


# --- errors ---------------------------------------------------------------------------


def test_unsupported_suffix(tmp_path: Path) -> None:
    path = tmp_path / "data.xyz"
    path.write_text("hello", encoding="utf-8")
    with pytest.raises(UnsupportedFormatError, match=r"unsupported file type '\.xyz'") as info:
        parse_file(path)
    assert "data.xyz" in str(info.value)
    assert ".pdf" in str(info.value)  # lists what is supported


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


def test_not_rtf(tmp_path: Path) -> None:
    path = tmp_path / "fake.rtf"
    path.write_text("plain words", encoding="utf-8")
    with pytest.raises(ParseError, match=r"fake\.rtf"):
        parse_file(path)


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
        f"import sys, flexmatch.parsing\nprint(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == ""
