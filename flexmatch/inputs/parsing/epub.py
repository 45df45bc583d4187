"""EPUB books: a zip of XHTML chapters, read in the book's reading order (its spine),
each by the HTML parser; the title from the book's metadata (``dc:title``).

The zip is checked before anything is read: chapters add up to at most the byte cap
(``ingest.max_document_bytes``) once decompressed, so a zip bomb is one clear failure.
The package file is read without external entities or network access. Images (and so
the text only they show) are not read here.
"""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from flexmatch.errors import DocumentTooLargeError, EmptyDocumentError, ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, finish, meaningful_title
from flexmatch.inputs.parsing.html import parse_html_bytes
from flexmatch.models import ParsedDocument

_CONTAINER = "META-INF/container.xml"
_XHTML = ("application/xhtml+xml", "text/html")


def _xml(data: bytes) -> Any:
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, recover=True)
    return etree.fromstring(data, parser=parser)


def _local(tag: Any) -> str:
    return str(tag).rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _spine(book: zipfile.ZipFile, path: Path) -> tuple[list[str], str]:
    """The chapters' names in the zip, in reading order, and the book's title."""
    try:
        container = _xml(book.read(_CONTAINER))
    except KeyError:
        raise ParseError(f"{path}: not an EPUB book (no {_CONTAINER})") from None
    rootfile = next((e for e in container.iter() if _local(e.tag) == "rootfile"), None)
    if rootfile is None or not rootfile.get("full-path"):
        raise ParseError(f"{path}: the EPUB names no package file")
    opf_name = str(rootfile.get("full-path"))
    package = _xml(book.read(opf_name))
    base = posixpath.dirname(opf_name)
    manifest = {
        str(item.get("id")): (str(item.get("href", "")), str(item.get("media-type", "")))
        for item in package.iter()
        if _local(item.tag) == "item"
    }
    names = []
    for ref in (e for e in package.iter() if _local(e.tag) == "itemref"):
        href, media = manifest.get(str(ref.get("idref")), ("", ""))
        if href and media in _XHTML:
            names.append(posixpath.normpath(posixpath.join(base, unquote(href))))
    title = next((e.text or "" for e in package.iter() if _local(e.tag) == "title"), "")
    return names, meaningful_title(title)


def parse_epub(path: Path) -> ParsedDocument:
    """Parse an .epub book, chapter by chapter in spine order."""
    from flexmatch.inputs.parsing import current_reading

    cap = current_reading().max_bytes
    builder = ElementBuilder()
    try:
        with zipfile.ZipFile(path) as book:
            chapters, title = _spine(book, path)
            sizes = {info.filename: info.file_size for info in book.infolist()}
            total = sum(sizes.get(name, 0) for name in chapters)
            if total > cap:
                raise DocumentTooLargeError(
                    f"{path}: its chapters decompress to {total:,} bytes, over the "
                    f"{cap:,}-byte cap (ingest.max_document_bytes)"
                )
            for name in chapters:
                if name not in sizes:
                    continue
                try:
                    chapter = parse_html_bytes(book.read(name), posixpath.basename(name))
                except EmptyDocumentError:
                    continue  # a cover or a page of images
                builder.elements.extend(chapter.elements)
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ParseError(f"{path}: could not parse EPUB file: {exc}") from None
    heading = builder.first_text("heading")
    return finish(path, builder, title or heading or path.stem, {"chapters": len(chapters)})
