"""HTML pages via BeautifulSoup (lxml), parsed from bytes so the right encoding is used.

Encoding order: byte-order mark, then the declared charset (``<meta>`` or XML
declaration), then strict UTF-8, then cp1252 (what browsers use for undeclared legacy
pages; latin-1 labels also mean cp1252 on the web). Page chrome (navigation, headers,
footers, scripts, forms) is dropped; the rest is walked in document order.

Every element's location names the fragment id of the part of the page it is in (a
heading's own id, its permalink's target, or the id of the ``<section>`` around it), so a
result links to ``page.html#that-part``. A heading without an id of its own (most pages
not written for linking) is named by its text instead, with the headings above it up
to the one an id names (``guide.html › Install › Linux``). Permalink anchors in headings
(Sphinx's ``¶``, the ``#`` of Node.js and GitHub pages, empty anchors: any link without a
letter or digit) are left out of the heading's text.
"""

from __future__ import annotations

import codecs
import re
import warnings
from collections.abc import Iterator
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
from flexmatch.models import ElementKind, Location, ParsedDocument

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
_SECTIONS = {"section", "article"}  # their id names the part of the page they hold
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


MAX_NESTING = 200  # blocks nested deeper than this are read as plain text of their ancestor


def _is_text(node: PageElement) -> bool:
    from bs4.element import NavigableString, PreformattedString

    return isinstance(node, NavigableString) and not isinstance(node, PreformattedString)


def _text(node: PageElement, separator: str = " ") -> str:
    """Text of a node; block descendants and ``<br>`` are separated by ``separator``
    (a newline inside ``<pre>``, whose own whitespace is kept).

    Iterative, so a deeply nested page costs time linear in its size and no recursion."""
    from bs4.element import Tag

    out: list[str] = []
    stack: list[tuple[PageElement, bool]] = [(node, False)]
    while stack:
        item, closing = stack.pop()
        if closing:
            out.append(separator)
        elif _is_text(item):
            out.append(str(item))
        elif isinstance(item, Tag):
            if item.name == "br":
                out.append(separator)
                continue
            if item.name in _BLOCKS:
                out.append(separator)
                stack.append((item, True))
            stack.extend((child, False) for child in reversed(item.contents))
    return "".join(out)


def _block_holders(root: Tag) -> set[int]:
    """ids of the tags that have a block element somewhere below them (one linear pass)."""
    from bs4.element import Tag

    tags = [root, *(t for t in root.descendants if isinstance(t, Tag))]
    holders: set[int] = set()
    for tag in reversed(tags):  # children before their parents
        if any(
            isinstance(c, Tag) and (c.name in _BLOCKS or id(c) in holders) for c in tag.contents
        ):
            holders.add(id(tag))
    return holders


def _fragment_id(value: object) -> str | None:
    """An id usable in a URL fragment (bs4 gives a list for multi-valued attributes)."""
    text = value[0] if isinstance(value, list) and value else value
    return text.strip() or None if isinstance(text, str) else None


def _heading_anchor(heading: Tag) -> str | None:
    """The heading's fragment id, its permalink anchors removed from it: its own id, else
    an id inside it, else where a link inside it to this page points."""
    from bs4.element import Tag

    anchors = [a for a in heading.find_all("a") if isinstance(a, Tag)]
    fragment = _fragment_id(heading.get("id"))
    for anchor in anchors:
        fragment = fragment or _fragment_id(anchor.get("id")) or _fragment_id(anchor.get("name"))
    for anchor in anchors:
        href = anchor.get("href")
        if not fragment and isinstance(href, str) and href.startswith("#") and len(href) > 1:
            fragment = href[1:]
    for anchor in anchors:
        if not any(ch.isalnum() for ch in anchor.get_text()):  # ¶, #, §, 🔗 or nothing
            anchor.decompose()
    return fragment


class _Walker:
    """Walks the cleaned tree in document order and emits elements, without recursion."""

    def __init__(self, root: Tag) -> None:
        self.builder = ElementBuilder()
        self._buffer: list[str] = []
        self._holders = _block_holders(root)
        self._fragment: str | None = None  # of the part of the page being read
        # the headings the part is under: (level, text, has an id of its own)
        self._headings: list[tuple[int, str, bool]] = []
        self._section_id = False  # a <section id=...> began: its heading is the part it names
        self._numbers: dict[int, int] = {}  # id of an <ol> → the number of its last item

    def _where(self) -> Location | None:
        """The part of the page being read: its fragment id, and the headings below the
        last one with an id of its own (all of them, when none has one; the page's ``<h1>``,
        its title, left out under a deeper heading)."""
        named: list[tuple[int, str]] = []
        for level, text, anchored in self._headings:
            named = [] if anchored else [*named, (level, text)]
        if len(named) > 1 and named[0][0] == 1:
            named = named[1:]
        section = " › ".join(text for _, text in named) or None
        if self._fragment is None and section is None:
            return None
        return Location(fragment=self._fragment, section=section)

    def _heading(self, heading: Tag) -> None:
        anchor = _heading_anchor(heading)  # first: its permalinks leave its text
        text, level = clean_inline(_text(heading)), _HEADINGS[heading.name]
        self._fragment = anchor or self._fragment
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        if text:
            self._headings.append((level, text, anchor is not None or self._section_id))
        self._section_id = False
        self._add("heading", text, level=level)

    def _add(self, kind: ElementKind, text: str, level: int = 0) -> None:
        self.builder.add(kind, text, level=level, location=self._where())

    def _flush(self) -> None:
        if self._buffer:
            self._add("paragraph", "".join(self._buffer))
            self._buffer.clear()

    def walk(self, root: Tag) -> None:
        from bs4.element import Tag

        stack: list[Iterator[PageElement]] = [iter(root.contents)]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                if stack:
                    self._flush()  # leaving a nested block
                continue
            if _is_text(child):
                self._buffer.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name
            if name in _SECTIONS and _fragment_id(child.get("id")):
                self._fragment = _fragment_id(child.get("id"))
                self._section_id = True
            if name in _HEADINGS:
                self._flush()
                self._heading(child)
            elif name == "p":
                self._flush()
                self._add("paragraph", _text(child))
            elif name == "li":
                self._flush()
                stack.append(iter(self._list_item(child)))
            elif name == "pre":
                self._flush()
                self._add("code", _text(child, "\n"))
            elif name == "table":
                self._flush()
                self._table(child)
            elif name == "br":
                self._buffer.append(" ")
            elif (name in _BLOCKS or id(child) in self._holders) and len(stack) < MAX_NESTING:
                self._flush()
                stack.append(iter(child.contents))
            else:
                self._buffer.append(_text(child))

    def _list_depth(self, li: Tag) -> int:
        """How many lists hold ``li`` (1 for a top-level item), read up to ``MAX_NESTING``."""
        depth = 0
        for steps, parent in enumerate(li.parents):
            if steps > MAX_NESTING:
                break
            if parent.name in _LISTS:
                depth += 1
        return depth

    def _marker_number(self, li: Tag) -> int | None:
        """The number an ordered list shows for ``li`` (``start`` and ``value`` honoured;
        counted per list, so a long list stays linear); None in a bulleted list."""
        parent = li.parent
        if parent is None or parent.name != "ol":
            return None
        value = li.get("value")
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            number = int(value)
        elif id(parent) in self._numbers:
            number = self._numbers[id(parent)] + 1
        else:
            start = parent.get("start")
            number = int(start) if isinstance(start, str) and start.strip().isdigit() else 1
        self._numbers[id(parent)] = number
        return number

    def _list_item(self, li: Tag) -> list[Tag]:
        """Add the item's own text as a Markdown list item (``- ``/``1. ``, indented by its
        nesting); return its nested lists and tables, to walk next."""
        from bs4.element import Tag

        parts: list[str] = []
        nested: list[Tag] = []
        for child in li.contents:
            if isinstance(child, Tag) and (child.name in _LISTS or child.name == "table"):
                nested.append(child)
            else:
                parts.append(_text(child))
        number = self._marker_number(li)
        where = self._where()
        level = max(0, self._list_depth(li) - 1)
        self.builder.add_list_item(
            "".join(parts), level, ordered=number is not None, number=number, location=where
        )
        return nested

    def _table(self, table: Tag) -> None:
        from bs4.element import Tag

        caption = next((c for c in table.contents if getattr(c, "name", None) == "caption"), None)
        if caption is not None:
            self._add("paragraph", _text(caption))
        rows: list[Tag] = []
        for child in table.contents:  # the table's own rows, not those of nested tables
            if not isinstance(child, Tag):
                continue
            if child.name == "tr":
                rows.append(child)
            elif child.name in ("thead", "tbody", "tfoot"):
                rows.extend(r for r in child.contents if isinstance(r, Tag) and r.name == "tr")
        lines = []
        for row in rows:
            cells = [
                clean_inline(_text(c))
                for c in row.contents
                if isinstance(c, Tag) and c.name in ("td", "th")
            ]
            cells = [c for c in cells if c] or [clean_inline(_text(row))]  # text without cells
            if any(cells):
                lines.append(" | ".join(c for c in cells if c))
        if not lines:  # a "table" holding text but no rows: keep the text
            self._add("paragraph", _text(table))
            return
        self._add("table", "\n".join(lines))


def _parse_html(data: bytes, label: Path | str, base_title: str) -> ParsedDocument:
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning

    with parse_errors(label, "HTML"):
        text, encoding = decode_html(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
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
            if tag.attrs is None:  # inside a tag decomposed already
                continue
            if (
                tag.has_attr("hidden")
                or tag.get("aria-hidden") == "true"
                or _HIDDEN_STYLE.search(str(tag.get("style", "")))
            ):
                tag.decompose()
        if soup.head is not None:
            soup.head.decompose()
        walker = _Walker(soup)
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
