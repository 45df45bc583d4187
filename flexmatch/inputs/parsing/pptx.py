"""PowerPoint decks (.pptx) via python-pptx, one slide at a time (each element's location
names its slide).

The slide title becomes a level-1 heading so each slide reads as a section; other shapes
follow top-to-bottom, left-to-right. Body-placeholder paragraphs and indented or bulleted
paragraphs are list items. Speaker notes are left out. Pictures are read by OCR in
their place (the ``ocr`` extra; without it they are left out).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flexmatch.inputs.parsing import ocr
from flexmatch.inputs.parsing._common import (
    ElementBuilder,
    finish,
    meaningful_title,
    parse_errors,
    table_text,
)
from flexmatch.models import ElementKind, Location, ParsedDocument

if TYPE_CHECKING:
    from pptx.shapes.base import BaseShape
    from pptx.text.text import _Paragraph


def _iter_shapes(shapes: Any) -> Iterator[BaseShape]:
    """Shapes in reading order (top, then left), descending into groups."""
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    def position(shape: BaseShape) -> tuple[int, int]:
        return (shape.top or 0, shape.left or 0)

    for shape in sorted(shapes, key=position):
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _iter_shapes(shape.shapes)
        else:
            yield shape


def _is_title(shape: BaseShape) -> bool:
    from pptx.enum.shapes import PP_PLACEHOLDER

    if not shape.is_placeholder:
        return False
    kind = shape.placeholder_format.type
    return kind in (
        PP_PLACEHOLDER.TITLE,
        PP_PLACEHOLDER.CENTER_TITLE,
        PP_PLACEHOLDER.VERTICAL_TITLE,
    )


def _is_body_placeholder(shape: BaseShape) -> bool:
    from pptx.enum.shapes import PP_PLACEHOLDER

    if not shape.is_placeholder:
        return False
    return shape.placeholder_format.type in (PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT)


def _paragraph_kind(paragraph: _Paragraph, in_body: bool) -> ElementKind:
    """A list item when bulleted: explicitly, by indent level, or in a body placeholder."""
    ppr = paragraph._p.pPr
    if ppr is not None:
        names = {child.tag.rsplit("}", 1)[-1] for child in ppr}
        if "buNone" in names:
            return "paragraph"
        if names & {"buChar", "buAutoNum", "buBlip"}:
            return "list_item"
    return "list_item" if in_body or paragraph.level > 0 else "paragraph"


def _numbered(paragraph: _Paragraph) -> bool:
    """Whether the paragraph's own properties number it (``a:buAutoNum``)."""
    ppr = paragraph._p.pPr
    return ppr is not None and any(child.tag.endswith("}buAutoNum") for child in ppr)


def parse_pptx(path: Path) -> ParsedDocument:
    """Parse a .pptx file."""
    from pptx import Presentation
    from pptx.shapes.autoshape import Shape
    from pptx.shapes.graphfrm import GraphicFrame
    from pptx.shapes.picture import Picture

    builder = ElementBuilder()
    log = ocr.OcrLog()
    can_ocr: bool | None = None  # asked at the first picture only
    with parse_errors(path, "PowerPoint (.pptx)"):
        deck = Presentation(str(path))
        for number, slide in enumerate(deck.slides, start=1):
            where = Location(slide=number)
            shapes = list(_iter_shapes(slide.shapes))
            titles = [s for s in shapes if _is_title(s) and isinstance(s, Shape)]
            for heading in titles:
                builder.add("heading", heading.text_frame.text, level=1, location=where)
            for shape in shapes:
                if shape in titles:
                    continue
                if isinstance(shape, GraphicFrame) and shape.has_table:
                    rows = ([cell.text for cell in row.cells] for row in shape.table.rows)
                    builder.add("table", table_text(rows), location=where)
                elif isinstance(shape, Shape):  # the shapes with a text frame
                    in_body = _is_body_placeholder(shape)
                    builder.lists.reset()  # each text box holds its own lists
                    for paragraph in shape.text_frame.paragraphs:
                        kind = _paragraph_kind(paragraph, in_body)
                        if kind == "list_item":  # "- "/"1. ", indented by the paragraph's level
                            ordered = _numbered(paragraph)
                            level = paragraph.level
                            builder.add_list_item(paragraph.text, level, ordered, location=where)
                        else:
                            builder.add(kind, paragraph.text, location=where)
                elif isinstance(shape, Picture):
                    can_ocr = ocr.available() if can_ocr is None else can_ocr
                    if can_ocr:
                        ocr.read_bytes(shape.image.blob, builder, log, where)
        deck_title = meaningful_title(deck.core_properties.title)
    title = deck_title or meaningful_title(builder.first_text("heading"))
    metadata = {"slides": len(deck.slides), **log.metadata()}
    return finish(path, builder, title or path.stem, metadata)
