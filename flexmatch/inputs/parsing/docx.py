"""Word documents (.docx) via python-docx, walking the body XML in document order.

The body is walked directly (paragraphs, tables, and content controls, which
``iter_inner_content`` skips) so text keeps its reading order. Paragraph styles give the
structure: "Title", "Heading N", "List ..." (or a numbering property) for list items.
Page headers and footers are left out: they repeat on every page and carry no content.
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
        for block in _iter_blocks(document.element.body, document._body):
            if isinstance(block, Table):
                builder.add("table", "\n".join(_table_rows(block)))
            else:
                kind, level = _paragraph_kind(block)
                text = block.text
                unbulleted = strip_bullet(text) if kind == "paragraph" else None
                if unbulleted is not None:  # a typed "• item" is a list item too
                    kind, text = "list_item", unbulleted
                builder.add(kind, text, level=level)
                for picture in _pictures(block):
                    can_ocr = ocr.available() if can_ocr is None else can_ocr
                    if can_ocr:
                        ocr.read_bytes(picture, builder, log)
        props = document.core_properties
        core_title = meaningful_title(props.title)
        if props.author:
            metadata["author"] = props.author
        if props.created:
            metadata["created"] = props.created.isoformat()
    title = core_title or builder.first_text("title") or builder.first_text("heading")
    return finish(path, builder, title or path.stem, {**metadata, **log.metadata(pictures=True)})
