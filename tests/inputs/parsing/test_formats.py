"""The formats of real folders: compressed single files, files known by their content,
reStructuredText, man pages, CSV/TSV, EPUB and Jupyter notebooks, and the parser
registry they join (names, the ``parsers`` setting, plug-ins)."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import shutil
import tomllib
import zipfile
from pathlib import Path

import pytest

from flexmatch.errors import (
    ConfigError,
    DocumentTooLargeError,
    EmptyDocumentError,
    ParseError,
    UnsupportedFormatError,
)
from flexmatch.inputs import parsing
from flexmatch.inputs.parsing import BUILTIN, check_parsers, parse_file, parser_names
from flexmatch.models import ParsedDocument
from tests.conftest import REPO

MAN_PAGE = r""".\" A small page in the man(7) macros
.TH FROB 1 "March 2024" "frob 2.0" "User Commands"
.SH NAME
frob \- twiddle the bits of a file
.SH SYNOPSIS
.B frob
[\fB\-v\fR] \fIfile\fR
.SH DESCRIPTION
.B frob
reads a file and twiddles its bits in place.
.SS Options
.TP
.BR \-v ", " \-\-verbose
say what is twiddled
.IP \(bu 2
first bullet point
.SH SEE ALSO
.BR bits (7)
"""

RST = """\
==========
Frob guide
==========

Frob twiddles bits; see :func:`frob.twiddle` and :ref:`the intro <intro>`.

Installing
==========

- download it
- run ``make``

.. code-block:: python

   import frob
   frob.twiddle("file")

.. versionadded:: 2.0
   The verbose flag.

.. autofunction:: frob.twiddle

.. include:: /etc/passwd

Tuning
------

1. pick a file
2. twiddle it

+--------+-------+
| Flag   | Means |
+========+=======+
| -v     | loud  |
+--------+-------+
"""


def text_of(doc: ParsedDocument) -> str:
    return "\n".join(e.text for e in doc.elements)


# --- compressed single files ------------------------------------------------------------


@pytest.mark.parametrize(
    ("suffix", "compress"),
    [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)],
)
def test_a_compressed_file_is_read_as_what_it_holds(
    tmp_path: Path, suffix: str, compress: object
) -> None:
    notes = tmp_path / f"NEWS{suffix}"
    notes.write_bytes(compress(b"Version 2.0\n\nThe frobnicator now twiddles bits.\n"))  # type: ignore[operator]
    doc = parse_file(notes)
    assert "The frobnicator now twiddles bits." in doc.text
    assert doc.metadata["compressed"] == suffix
    markdown = tmp_path / f"guide.md{suffix}"
    markdown.write_bytes(compress(b"# Guide\n\n## Install\n\nRun make.\n"))  # type: ignore[operator]
    headings = [e.text for e in parse_file(markdown).elements if e.kind == "heading"]
    assert headings == ["Guide", "Install"]


def test_a_gzipped_man_page_is_a_man_page(tmp_path: Path) -> None:
    page = tmp_path / "frob.1.gz"
    page.write_bytes(gzip.compress(MAN_PAGE.encode()))
    doc = parse_file(page)
    assert doc.title == "frob - twiddle the bits of a file"
    assert doc.metadata["format"] == "man"


def test_the_byte_cap_applies_to_the_decompressed_bytes(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.txt.gz"
    bomb.write_bytes(gzip.compress(b"a word " * 700_000))  # ~5 KB that hold 4.9 MB
    assert bomb.stat().st_size < 20_000
    with pytest.raises(DocumentTooLargeError, match=r"bomb\.txt\.gz: decompresses to over 1,000"):
        parse_file(bomb, max_bytes=1_000_000)
    assert "a word" in parse_file(bomb, max_bytes=6_000_000).text


def test_a_corrupt_or_empty_compressed_file_is_one_clear_error(tmp_path: Path) -> None:
    corrupt = tmp_path / "notes.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    with pytest.raises(ParseError, match=r"notes\.gz: could not decompress gzip file"):
        parse_file(corrupt)
    empty = tmp_path / "empty.txt.gz"
    empty.write_bytes(gzip.compress(b"  \n"))
    with pytest.raises(EmptyDocumentError, match=r"empty\.txt\.gz"):
        parse_file(empty)


def test_errors_inside_a_compressed_file_name_it_not_a_temporary_copy(tmp_path: Path) -> None:
    blob = tmp_path / "data.bin.gz"
    blob.write_bytes(gzip.compress(bytes(range(256)) * 8))
    with pytest.raises(UnsupportedFormatError) as info:
        parse_file(blob)
    assert str(blob) in str(info.value) and "flexmatch-" not in str(info.value)


# --- files known by their content ---------------------------------------------------------


@pytest.mark.parametrize("name", ["README", "copyright", "NEWS", "README.Debian", "notes.cfg2"])
def test_text_without_a_known_suffix_is_read_as_text(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes("Format: machine-readable\n\nFiles: *\nCopyright: 2024 Jörg\n".encode())
    doc = parse_file(path)
    assert "Copyright: 2024 Jörg" in doc.text
    assert doc.elements[0].location is not None and doc.elements[0].location.line_start == 1


def test_text_in_a_western_encoding_is_decoded(tmp_path: Path) -> None:
    path = tmp_path / "NEWS"
    path.write_bytes("Fixes by Klaus Kämpf and Dag-Erling Smørgrav.\n".encode("latin-1"))
    assert "Klaus Kämpf and Dag-Erling Smørgrav" in parse_file(path).text


def test_content_says_what_an_unnamed_file_is(tmp_path: Path) -> None:
    roff = tmp_path / "frob"
    roff.write_text(MAN_PAGE, encoding="utf-8")
    assert parse_file(roff).metadata["format"] == "man"
    html = tmp_path / "index"
    html.write_text("<!DOCTYPE html><html><body><h1>Hi</h1><p>Body text.</p></body></html>")
    assert [e.kind for e in parse_file(html).elements] == ["heading", "paragraph"]
    blob = tmp_path / "libfrob.so.6"
    blob.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(2000))
    with pytest.raises(UnsupportedFormatError, match=r"libfrob\.so\.6: looks like a binary"):
        parse_file(blob)  # '.6' is a man page's suffix; its content says otherwise


# --- reStructuredText ---------------------------------------------------------------------


def test_rst_structure_and_lines(tmp_path: Path) -> None:
    path = tmp_path / "guide.rst"
    path.write_text(RST, encoding="utf-8")
    doc = parse_file(path)
    assert doc.title == "Frob guide"
    headings = [(e.text, e.level) for e in doc.elements if e.kind == "heading"]
    assert headings == [("Frob guide", 1), ("Installing", 2), ("Tuning", 3)]
    items = [e.text for e in doc.elements if e.kind == "list_item"]
    assert items == ["download it", "run make", "1. pick a file", "2. twiddle it"]
    code = next(e for e in doc.elements if e.kind == "code")
    assert code.text == 'import frob\nfrob.twiddle("file")'
    assert code.location is not None
    assert (code.location.line_start, code.location.line_end) == (15, 16)
    first = next(e for e in doc.elements if e.kind == "paragraph")
    # Sphinx roles docutils does not know keep their text; the file still reads
    assert first.text == "Frob twiddles bits; see frob.twiddle and the intro."
    assert first.location is not None and first.location.line_start == 5
    text = text_of(doc)
    assert "The verbose flag." in text  # an unknown directive keeps its content
    assert "frob.twiddle" in text
    assert "root:" not in text and "include" not in text  # nothing read outside the file
    assert "Flag | Means" in text and "-v | loud" in text
    assert "Unknown" not in text and "ERROR" not in text  # docutils' messages are dropped


def test_rst_with_mistakes_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "broken.rst"
    path.write_text("Title\n===\n\n* item\nnot indented\n\n.. bogus::\n\n`unclosed\n")
    assert "item" in parse_file(path).text


# --- man pages ----------------------------------------------------------------------------


def test_man_page_sections_become_headings(tmp_path: Path) -> None:
    path = tmp_path / "frob.1"
    path.write_text(MAN_PAGE, encoding="utf-8")
    doc = parse_file(path)
    headings = [(e.text, e.level) for e in doc.elements if e.kind == "heading"]
    assert headings == [
        ("NAME", 2),
        ("SYNOPSIS", 2),
        ("DESCRIPTION", 2),
        ("Options", 3),
        ("SEE ALSO", 2),
    ]
    text = text_of(doc)
    assert "frob [-v] file" in text
    assert "-v, --verbose say what is twiddled" in text
    assert "first bullet point" in [e.text for e in doc.elements if e.kind == "list_item"]
    assert "FROB(1)" not in text  # the running header and footer
    assert "\\f" not in text and "\\-" not in text


def test_a_man_page_that_only_links_to_another_has_no_text(tmp_path: Path) -> None:
    path = tmp_path / "unfrob.1"
    path.write_text('.\\" an alias\n.so man1/frob.1\n', encoding="utf-8")
    with pytest.raises(EmptyDocumentError, match=r"unfrob\.1: no text found \(a link to"):
        parse_file(path)


@pytest.mark.skipif(not Path("/usr/share/man/man1/ls.1.gz").is_file(), reason="no ls(1) here")
def test_a_real_man_page(tmp_path: Path) -> None:
    page = tmp_path / "ls.1.gz"
    shutil.copy("/usr/share/man/man1/ls.1.gz", page)
    doc = parse_file(page)
    assert doc.title.startswith("ls - list directory contents")
    headings = [e.text for e in doc.elements if e.kind == "heading"]
    assert headings[:3] == ["NAME", "SYNOPSIS", "DESCRIPTION"]
    assert any(e.text.startswith("-a, --all do not ignore entries") for e in doc.elements)


# --- CSV and TSV --------------------------------------------------------------------------


def test_csv_rows_carry_their_header_and_row_number(tmp_path: Path) -> None:
    path = tmp_path / "prices.csv"
    path.write_text('item;price;note\nflour;1.20;"fine, white"\n\nsugar;0.90;\n')
    doc = parse_file(path)
    header, *rows = doc.elements
    assert (header.kind, header.text, header.level) == ("heading", "item | price | note", 1)
    assert [r.text for r in rows] == [
        "item: flour; price: 1.20; note: fine, white",
        "item: sugar; price: 0.90",
    ]
    assert [(r.location.row_start, r.location.row_end) for r in rows if r.location] == [
        (2, 2),
        (4, 4),
    ]


def test_tsv_without_a_header_keeps_its_cells(tmp_path: Path) -> None:
    path = tmp_path / "numbers.tsv"
    path.write_text("1\t2\t3\n4\t5\t6\n")
    doc = parse_file(path)
    (table,) = doc.elements  # consecutive short rows: one element, a line each
    assert (table.kind, table.text) == ("table", "1 | 2 | 3\n4 | 5 | 6")
    assert table.location is not None
    assert (table.location.row_start, table.location.row_end) == (1, 2)


def test_csv_rows_are_gathered_while_short_and_consecutive(tmp_path: Path) -> None:
    path = tmp_path / "words.csv"
    long = " ".join(["word"] * 150)  # over the gathering budget alone
    path.write_text("a\nb\n\nc\n" + long + "\nd\n")
    spans = [
        (e.text, e.location.row_start, e.location.row_end)
        for e in parse_file(path).elements
        if e.location is not None
    ]
    assert spans == [("a\nb", 1, 2), ("c", 4, 4), (long, 5, 5), ("d", 6, 6)]


# --- EPUB ---------------------------------------------------------------------------------


def make_epub(path: Path, chapters: list[tuple[str, str]], title: str = "Frob Book") -> Path:
    """A minimal EPUB 3: mimetype first (stored), container, package, XHTML chapters."""
    items = "".join(
        f'<item id="c{i}" href="text/{name}" media-type="application/xhtml+xml"/>'
        for i, (name, _) in enumerate(chapters)
    )
    # the spine reads the chapters in reverse order of the manifest: the spine wins
    spine = "".join(f'<itemref idref="c{i}"/>' for i in reversed(range(len(chapters))))
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title>'
        f"</metadata><manifest>{items}</manifest><spine>{spine}</spine></package>"
    )
    container = (
        '<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:'
        'container" version="1.0"><rootfiles><rootfile full-path="OEBPS/book.opf" '
        'media-type="application/oebps-package+xml"/></rootfiles></container>'
    )
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml", container)
        book.writestr("OEBPS/book.opf", opf)
        for name, body in chapters:
            book.writestr(f"OEBPS/text/{name}", f"<html><body>{body}</body></html>")
    return path


def test_epub_chapters_in_spine_order(tmp_path: Path) -> None:
    book = make_epub(
        tmp_path / "frob.epub",
        [
            ("two.xhtml", "<h1>Chapter Two</h1><p>Bits get twiddled.</p>"),
            ("one.xhtml", "<h1>Chapter One</h1><p>Frob is installed.</p>"),
            ("cover.xhtml", "<img src='cover.png'/>"),
        ],
    )
    doc = parse_file(book)
    assert doc.title == "Frob Book"
    assert [e.text for e in doc.elements if e.kind == "heading"] == ["Chapter One", "Chapter Two"]
    unnamed = tmp_path / "book-without-suffix"
    shutil.copy(book, unnamed)  # an EPUB says what it is in its first bytes
    assert parse_file(unnamed).title == "Frob Book"


def test_an_epub_over_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    book = make_epub(tmp_path / "big.epub", [("a.xhtml", "<p>" + "x" * 2_000_000 + "</p>")])
    with pytest.raises(DocumentTooLargeError, match=r"big\.epub: its chapters decompress"):
        parse_file(book, max_bytes=1_000_000)


# --- notebooks ----------------------------------------------------------------------------


def test_notebook_cells_and_text_outputs(tmp_path: Path) -> None:
    notebook = {
        "nbformat": 4,
        "metadata": {"language_info": {"name": "python"}},
        "cells": [
            {"cell_type": "markdown", "source": ["# Frob demo\n", "\n", "Twiddle some bits."]},
            {
                "cell_type": "code",
                "source": "print(frob.twiddle(3))",
                "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": ["12\n"]},
                    {"output_type": "display_data", "data": {"image/png": "AAAA"}},
                    {"output_type": "execute_result", "data": {"text/plain": ["'done'"]}},
                ],
            },
            {
                "cell_type": "code",
                "source": "1/0",
                "outputs": [
                    {
                        "output_type": "error",
                        "ename": "ZeroDivisionError",
                        "evalue": "division by zero",
                        "traceback": ["\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"],
                    }
                ],
            },
        ],
    }
    path = tmp_path / "demo.ipynb"
    path.write_text(json.dumps(notebook))
    doc = parse_file(path)
    assert doc.title == "Frob demo" and doc.metadata["language"] == "python"
    assert [(e.kind, e.text) for e in doc.elements] == [
        ("heading", "Frob demo"),
        ("paragraph", "Twiddle some bits."),
        ("code", "print(frob.twiddle(3))"),
        ("code", "12"),
        ("code", "'done'"),
        ("code", "1/0"),
        ("code", "ZeroDivisionError: division by zero"),
    ]


def test_a_broken_notebook_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [')
    with pytest.raises(ParseError, match=r"broken\.ipynb: not a readable notebook"):
        parse_file(path)


# --- the registry and the parsers setting ---------------------------------------------------


def test_builtin_parsers_are_the_entry_points_pyproject_declares() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared["flexmatch.parsers"] == BUILTIN
    assert set(BUILTIN) <= set(parser_names())


def test_the_parsers_setting_chooses_a_parser_by_name_or_glob(tmp_path: Path) -> None:
    path = tmp_path / "notes.Debian"
    path.write_text("# not a heading\n\nplain words\n")
    assert [e.kind for e in parse_file(path).elements] == ["paragraph", "paragraph"]
    as_markdown = parse_file(path, parsers={"*.Debian": "markdown"})
    assert [e.kind for e in as_markdown.elements] == ["heading", "paragraph"]
    csv_as_text = tmp_path / "copyright.csv"
    csv_as_text.write_text("a,b\n1,2\n")
    assert parse_file(csv_as_text, parsers={"copyright.csv": "text"}).text == "a,b 1,2"


def test_an_unknown_parser_is_a_config_error_naming_it_and_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        check_parsers({"*.Debian": "txt"})
    message = str(info.value)
    assert "'*.Debian'" in message and "no parser 'txt'" in message
    assert "known parsers: code, csv," in message and "text" in message
    check_parsers({"*.Debian": "text", "copyright": "text"})


@pytest.mark.usefixtures("fresh_plugins")
def test_a_broken_parser_plugin_is_named_and_the_others_keep_working(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A plug-in on the path through real distribution metadata (a .dist-info folder)."""
    site = tmp_path / "site"
    info = site / "frobparse-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: frobparse\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[flexmatch.parsers]\nfrob = frobparse:read\nbroken = frobparse_missing:read\n"
        "text = frobparse:read\n"
    )
    (site / "frobparse.py").write_text(
        "from flexmatch.models import Element, ParsedDocument\n"
        "def read(path):\n"
        "    return ParsedDocument(elements=[Element(kind='paragraph', text='frobbed')])\n"
        "read.suffixes = ['.frob', '.txt']\n"
    )
    monkeypatch.syspath_prepend(str(site))
    assert {"frob", "text"} <= set(parser_names())
    assert "frobparse_missing" in parsing.broken_parser_plugins()["broken"]
    with pytest.raises(ConfigError, match="parser plug-in 'broken': 'frobparse_missing:read'"):
        check_parsers({"*.x": "broken"})
    claimed = tmp_path / "a.frob"
    claimed.write_text("anything")
    assert parse_file(claimed).text == "frobbed"  # the plug-in's suffix
    kept = tmp_path / "a.txt"
    kept.write_text("plain words")
    assert parse_file(kept).text == "plain words"  # a built-in's suffix stays its own
    assert parse_file(kept, parsers={"a.txt": "frob"}).text == "frobbed"


def test_plain_text_under_a_man_page_suffix_is_read_as_text(tmp_path: Path) -> None:
    path = tmp_path / "notes.1"
    path.write_text("Release notes\n\nFrob 1 twiddles bits.\n")
    doc = parse_file(path)
    assert [(e.kind, e.text) for e in doc.elements] == [
        ("paragraph", "Release notes"),
        ("paragraph", "Frob 1 twiddles bits."),
    ]
    assert doc.elements[1].location is not None and doc.elements[1].location.line_start == 3


def test_an_mdoc_page_is_rendered_too(tmp_path: Path) -> None:
    path = tmp_path / "frob.8"
    path.write_text(
        ".Dd March 1, 2024\n.Dt FROB 8\n.Os\n.Sh NAME\n.Nm frob\n.Nd twiddle bits\n"
        ".Sh DESCRIPTION\nThe\n.Nm\nutility twiddles bits.\n"
    )
    doc = parse_file(path)
    assert doc.title == "frob \u2014 twiddle bits"  # mdoc's Nd dash
    assert [e.text for e in doc.elements if e.kind == "heading"] == ["NAME", "DESCRIPTION"]
    assert "The frob utility twiddles bits." in text_of(doc)


def test_a_setting_for_a_compressed_name_reads_what_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "changelog.Debian.gz"
    path.write_bytes(gzip.compress(b"# not a heading\n\nfrob (2.0) unstable\n"))
    assert [e.kind for e in parse_file(path).elements] == ["paragraph", "paragraph"]
    doc = parse_file(path, parsers={"changelog.Debian.gz": "markdown"})
    assert [e.kind for e in doc.elements] == ["heading", "paragraph"]
    inner = parse_file(path, parsers={"*.Debian": "markdown"})  # the name it holds
    assert [e.kind for e in inner.elements] == ["heading", "paragraph"]
