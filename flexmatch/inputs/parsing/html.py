"""HTML pages via BeautifulSoup (lxml), parsed from bytes so the right encoding is used.

Encoding order: byte-order mark, then the declared charset (``<meta>`` or XML
declaration), then strict UTF-8, then cp1252 (what browsers use for undeclared legacy
pages; latin-1 labels also mean cp1252 on the web). Page chrome (navigation, headers,
footers, scripts, forms) is dropped; the rest is walked in document order.
"""

from __future__ import annotations

import codecs
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing._common import (
    ElementBuilder,
    clean_inline,
    finish,
    meaningful_title,
    parse_errors,
)
from flexmatch.models import ParsedDocument

if TYPE_CHECKING:
    from bs4.element import PageElement, Tag

DROPPED_TAGS = (
    "script",
    "style",
    "noscript",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "iframe",
    "svg",
    "template",
    "button",
    "select",
    "object",
    "embed",
    "canvas",
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKS = {
    "address", "article", "blockquote", "body", "center", "dd", "details", "dialog", "div",
    "dl", "dt", "fieldset", "figcaption", "figure", "hgroup", "hr", "html", "li", "main",
    "menu", "ol", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th",
    "thead", "tr", "ul", "caption", "h1", "h2", "h3", "h4", "h5", "h6",
}  # fmt: skip
_LISTS = {"ul", "ol", "menu"}
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
# WHATWG: these labels are decoded as windows-1252; a declared UTF-16 in a byte stream
# that parsed as ASCII-compatible is really UTF-8.
_ENCODING_ALIASES = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin-1": "cp1252",
    "latin1": "cp1252",
    "l1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "windows-1252": "cp1252",
    "utf-16": "utf-8",
    "utf-16le": "utf-8",
    "utf-16be": "utf-8",
}


def decode_html(data: bytes) -> tuple[str, str]:
    """Decode HTML bytes; return (text, encoding used)."""
    from bs4.dammit import EncodingDetector

    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, errors="replace"), encoding
    declared = EncodingDetector.find_declared_encoding(data, is_html=True) or ""
    declared = declared.strip().lower()
    candidates = [_ENCODING_ALIASES.get(declared, declared)] if declared else []
    candidates += ["utf-8", "cp1252"]
    for encoding in candidates:
        try:
            codecs.lookup(encoding)
            return data.decode(encoding), encoding
        except (LookupError, UnicodeDecodeError):
            continue
    return data.decode("cp1252", errors="replace"), "cp1252"


def _is_text(node: PageElement) -> bool:
    from bs4.element import NavigableString, PreformattedString

    return isinstance(node, NavigableString) and not isinstance(node, PreformattedString)


def _text(node: PageElement) -> str:
    """Text of a node; block descendants and ``<br>`` are separated by spaces."""
    from bs4.element import Tag

    if _is_text(node):
        return str(node)
    if not isinstance(node, Tag):
        return ""
    if node.name == "br":
        return " "
    inner = "".join(_text(child) for child in node.children)
    return f" {inner} " if node.name in _BLOCKS else inner


def _has_block(tag: Tag) -> bool:
    return tag.find(lambda t: t.name in _BLOCKS) is not None


class _Walker:
    """Walks the cleaned tree in document order and emits elements."""

    def __init__(self) -> None:
        self.builder = ElementBuilder()
        self._buffer: list[str] = []

    def _flush(self) -> None:
        if self._buffer:
            self.builder.add("paragraph", "".join(self._buffer))
            self._buffer.clear()

    def walk(self, node: Tag) -> None:
        from bs4.element import Tag

        for child in node.children:
            if _is_text(child):
                self._buffer.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name
            if name in _HEADINGS:
                self._flush()
                self.builder.add("heading", _text(child), level=_HEADINGS[name])
            elif name == "p":
                self._flush()
                self.builder.add("paragraph", _text(child))
            elif name == "li":
                self._flush()
                self._list_item(child)
            elif name == "pre":
                self._flush()
                self.builder.add("code", child.get_text())
            elif name == "table":
                self._flush()
                self._table(child)
            elif name == "br":
                self._buffer.append(" ")
            elif name in _BLOCKS or _has_block(child):
                self._flush()
                self.walk(child)
                self._flush()
            else:
                self._buffer.append(_text(child))

    def _list_item(self, li: Tag) -> None:
        from bs4.element import Tag

        parts: list[str] = []
        nested: list[Tag] = []
        for child in li.children:
            if isinstance(child, Tag) and (child.name in _LISTS or child.name == "table"):
                nested.append(child)
            else:
                parts.append(_text(child))
        self.builder.add("list_item", "".join(parts))
        for child in nested:
            if child.name == "table":
                self._table(child)
            else:
                self.walk(child)

    def _table(self, table: Tag) -> None:
        caption = table.find("caption")
        if caption is not None and caption.find_parent("table") is table:
            self.builder.add("paragraph", _text(caption))
        lines = []
        for row in table.find_all("tr"):
            if row.find_parent("table") is not table:
                continue
            cells = [clean_inline(_text(c)) for c in row.find_all(["td", "th"], recursive=False)]
            cells = [c for c in cells if c]
            if cells:
                lines.append(" | ".join(cells))
        self.builder.add("table", "\n".join(lines))


def _parse_html(data: bytes, label: Path | str, base_title: str) -> ParsedDocument:
    from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning

    with parse_errors(label, "HTML"):
        text, encoding = decode_html(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            soup = BeautifulSoup(text, "lxml")
        title = meaningful_title(soup.title.get_text()) if soup.title else ""
        metadata: dict[str, str] = {"encoding": encoding}
        root = soup.find("html")
        if root is not None and root.get("lang"):
            metadata["language"] = str(root.get("lang"))
        description = soup.find("meta", attrs={"name": "description"})
        if description is not None and description.get("content"):
            metadata["description"] = clean_inline(str(description.get("content")))
        for tag in soup.find_all(DROPPED_TAGS):
            tag.decompose()
        for tag in soup.find_all(True):
            if tag.decomposed or tag.attrs is None:
                continue
            if (
                tag.has_attr("hidden")
                or tag.get("aria-hidden") == "true"
                or _HIDDEN_STYLE.search(str(tag.get("style", "")))
            ):
                tag.decompose()
        if soup.head is not None:
            soup.head.decompose()
        walker = _Walker()
        walker.walk(soup)
        walker._flush()
    builder = walker.builder
    h1 = next((e.text for e in builder.elements if e.kind == "heading" and e.level == 1), "")
    return finish(label, builder, title or h1 or base_title, metadata)


def parse_html_bytes(data: bytes, base_title: str = "") -> ParsedDocument:
    """Parse an HTML page given as bytes (e.g. downloaded); ``base_title`` is the fallback title.

    Error messages name ``base_title`` (or "HTML document") since there is no file.
    """
    return _parse_html(data, base_title or "HTML document", base_title)


def parse_html(path: Path) -> ParsedDocument:
    """Parse an .html/.htm/.xhtml file."""
    data = path.read_bytes()
    if b"\x00" in data[:4096] and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ParseError(f"{path}: looks like a binary file, not HTML")
    return _parse_html(data, path, path.stem)
