"""Word documents (.docx) via python-docx, walking the body XML in document order.

The body is walked directly (paragraphs, tables, and content controls, which
``iter_inner_content`` skips) so text keeps its reading order. Paragraph styles give the
structure: "Title", "Heading N", "List ..." (or a numbering property) for list items.
Page headers and footers are page furniture (see ``_furniture``): their text is kept out
of the chunk text and stored once in the metadata (``page_headers``, ``page_footers``); a
header is the title of a document that has no other.
Pictures in the body are read by OCR where they stand (the ``ocr`` extra; without it they
are left out, as before).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flexmatch.inputs.parsing import ocr
from flexmatch.inputs.parsing._common import (
    ElementBuilder,
    clean_inline,
    finish,
    meaningful_title,
    parse_errors,
    strip_bullet,
)
from flexmatch.models import ElementKind, ParsedDocument

if TYPE_CHECKING:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

_VML = "urn:schemas-microsoft-com:vml"  # legacy pictures (v:imagedata)
_HEADING_STYLE = re.compile(r"^heading\s*(\d*)$", re.IGNORECASE)


def _iter_blocks(container: Any, parent: Any) -> Iterator[Paragraph | Table]:
    """Paragraphs and tables under ``container`` in order, looking inside content controls."""
    from docx.oxml.ns import qn
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    for child in container.iterchildren():
        if child.tag == qn("w:p"):
            yield Paragraph(child, parent)
        elif child.tag == qn("w:tbl"):
            yield Table(child, parent)
        elif child.tag in (qn("w:sdt"), qn("w:customXml")):
            content = child.find(qn("w:sdtContent"))
            yield from _iter_blocks(content if content is not None else child, parent)


def _paragraph_kind(paragraph: Paragraph) -> tuple[ElementKind, int]:
    """(kind, heading level) of a paragraph from its style, outline level and numbering."""
    from docx.oxml.ns import qn

    try:
        style = paragraph.style.name if paragraph.style is not None else ""
    except Exception:  # a broken style reference must not lose the text
        style = ""
    style = (style or "").strip()
    low = style.lower()
    if low == "title":
        return "title", 0
    heading = _HEADING_STYLE.match(style)
    if heading:
        return "heading", int(heading.group(1) or 1)
    ppr = paragraph._p.pPr
    outline = ppr.find(qn("w:outlineLvl")) if ppr is not None else None
    if outline is not None:
        value = outline.get(qn("w:val"))
        if value is not None and value.isdigit() and int(value) < 9:
            return "heading", int(value) + 1
    if low.startswith("list") or (ppr is not None and ppr.numPr is not None):
        return "list_item", 0
    return "paragraph", 0


class _Numbering:
    """Word's list numbering, so an item gets its Markdown marker: whether each (list,
    level) is numbered and where it starts (numbering part), and the count so far (Word
    counts on across paragraphs between items of one list; a deeper level restarts)."""

    def __init__(self, document: Any) -> None:
        from docx.oxml.ns import qn

        self._formats: dict[tuple[str, int], tuple[bool, int]] = {}
        self._counts: dict[tuple[str, int], int] = {}
        try:
            root = document.part.numbering_part.element
        except (KeyError, NotImplementedError, AttributeError):  # no numbering part
            return
        abstract: dict[str, dict[int, tuple[bool, int]]] = {}
        for definition in root.findall(qn("w:abstractNum")):
            levels: dict[int, tuple[bool, int]] = {}
            for lvl in definition.findall(qn("w:lvl")):
                fmt, start = lvl.find(qn("w:numFmt")), lvl.find(qn("w:start"))
                kind = fmt.get(qn("w:val")) if fmt is not None else "decimal"
                first = start.get(qn("w:val")) if start is not None else "1"
                ilvl = lvl.get(qn("w:ilvl")) or "0"
                if ilvl.isdigit():
                    ordered = kind not in ("bullet", "none")
                    levels[int(ilvl)] = (ordered, int(first) if first.isdigit() else 1)
            abstract[definition.get(qn("w:abstractNumId")) or ""] = levels
        for num in root.findall(qn("w:num")):
            link = num.find(qn("w:abstractNumId"))
            levels = abstract.get(link.get(qn("w:val")) if link is not None else "", {})
            for ilvl, value in levels.items():
                self._formats[(num.get(qn("w:numId")) or "", ilvl)] = value

    def marker(self, paragraph: Paragraph) -> tuple[int, bool, int | None]:
        """(level, ordered, number) of a list paragraph, from its own numbering or its
        style's ("List Number 2": numbered, second level, when the style has none)."""
        from docx.oxml.ns import qn

        num_id, level = "", 0
        style = paragraph.style
        for ppr in (paragraph._p.pPr, *_style_pprs(style)):
            numpr = ppr.find(qn("w:numPr")) if ppr is not None else None
            if numpr is None:
                continue
            ilvl, nid = numpr.find(qn("w:ilvl")), numpr.find(qn("w:numId"))
            if ilvl is not None and (ilvl.get(qn("w:val")) or "").isdigit():
                level = int(ilvl.get(qn("w:val")))
            if nid is not None:
                num_id = nid.get(qn("w:val")) or ""
                break
        if (num_id, level) not in self._formats:
            name = (getattr(style, "name", "") or "").lower()
            digit = name[-1:] if name[-1:].isdigit() else ""
            return (int(digit) - 1 if digit else level), "number" in name, None
        ordered, start = self._formats[(num_id, level)]
        for key in [k for k in self._counts if k[0] == num_id and k[1] > level]:
            del self._counts[key]  # a deeper level starts again under a new parent item
        number = self._counts.get((num_id, level), start - 1) + 1
        self._counts[(num_id, level)] = number
        return level, ordered, number if ordered else None


def _style_pprs(style: Any) -> Iterator[Any]:
    """The paragraph properties of a style and of the styles it is based on."""
    for _ in range(10):  # a cycle of based-on styles must end
        if style is None:
            return
        yield style.element.pPr
        style = style.base_style


_PAGE_NUMBER = re.compile(r"^(page\s*)?\d+(\s*(of|/)\s*\d+)?$", re.IGNORECASE)


def _furniture(document: Any) -> dict[str, list[str]]:
    """The distinct lines of the sections' headers and footers (first-page and even-page
    ones too), in order; page numbers left out. A header or footer linked to the previous
    section's is that one again, so it is not read twice."""
    found: dict[str, list[str]] = {"page_headers": [], "page_footers": []}
    for section in document.sections:
        for key, parts in (
            ("page_headers", (section.header, section.first_page_header, section.even_page_header)),
            ("page_footers", (section.footer, section.first_page_footer, section.even_page_footer)),
        ):
            for part in parts:
                if part.is_linked_to_previous:
                    continue
                lines = [p.text for p in part.paragraphs]
                lines += [row for table in part.tables for row in _table_rows(table)]
                for line in map(clean_inline, lines):
                    if line and not _PAGE_NUMBER.match(line) and line not in found[key]:
                        found[key].append(line)
    return {key: lines for key, lines in found.items() if lines}


def _cell_text(cell: Any) -> str:
    """Text of a table cell; a nested table is flattened to "[a | b; c | d]"."""
    from docx.table import Table

    parts = []
    for block in _iter_blocks(cell._tc, cell):
        if isinstance(block, Table):
            parts.append("[" + "; ".join(_table_rows(block)) + "]")
        else:
            parts.append(block.text)
    return clean_inline(" ".join(parts))


def _table_rows(table: Table) -> list[str]:
    """One line per row, cells joined by " | ".

    Cells are read from the row XML, so a horizontally merged cell appears once and the
    empty continuation of a vertically merged cell is skipped; empty cells are dropped.
    """
    from docx.table import _Cell

    lines = []
    for tr in table._tbl.tr_lst:
        cells = [_cell_text(_Cell(tc, table)) for tc in tr.tc_lst]
        cells = [c for c in cells if c]
        if cells:
            lines.append(" | ".join(cells))
    return lines


def _pictures(paragraph: Paragraph) -> Iterator[bytes]:
    """The bytes of each picture in a paragraph (DrawingML and legacy VML), in order."""
    from docx.oxml.ns import qn

    related = paragraph.part.related_parts
    for element in paragraph._p.iter(qn("a:blip"), f"{{{_VML}}}imagedata"):
        rid = element.get(qn("r:embed")) or element.get(qn("r:id"))
        part = related.get(rid) if rid else None
        if part is not None and getattr(part, "blob", None):
            yield part.blob


def parse_docx(path: Path) -> ParsedDocument:
    """Parse a .docx file."""
    import docx
    from docx.table import Table

    builder = ElementBuilder()
    metadata: dict[str, Any] = {}
    log = ocr.OcrLog()
    can_ocr: bool | None = None  # asked at the first picture only
    with parse_errors(path, "Word (.docx)"):
        document = docx.Document(str(path))
        numbering = _Numbering(document)
        for block in _iter_blocks(document.element.body, document._body):
            if isinstance(block, Table):
                builder.add("table", "\n".join(_table_rows(block)))
            else:
                kind, level = _paragraph_kind(block)
                text = block.text
                unbulleted = strip_bullet(text) if kind == "paragraph" else None
                if unbulleted is not None:  # a typed "• item" is a list item too
                    builder.add_list_item(unbulleted)
                elif kind == "list_item":
                    depth, ordered, number = numbering.marker(block)
                    builder.add_list_item(text, depth, ordered, number)
                else:
                    builder.add(kind, text, level=level)
                for picture in _pictures(block):
                    can_ocr = ocr.available() if can_ocr is None else can_ocr
                    if can_ocr:
                        ocr.read_bytes(picture, builder, log)
        furniture = _furniture(document)
        metadata.update(furniture)
        props = document.core_properties
        core_title = meaningful_title(props.title)
        if props.author:
            metadata["author"] = props.author
        if props.created:
            metadata["created"] = props.created.isoformat()
    title = core_title or builder.first_text("title") or builder.first_text("heading")
    title = title or meaningful_title(next(iter(furniture.get("page_headers", [])), ""))
    return finish(path, builder, title or path.stem, {**metadata, **log.metadata(pictures=True)})
