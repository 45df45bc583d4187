"""PDF files via pdfminer.six layout analysis: text boxes per page, in reading order.

PDFs have no structure tags we can rely on, so headings are inferred from typography:
a short box whose characters are clearly larger than the document's body text (median
character size) is a heading, level 1 for the largest such size and 2 for the others. A
short box set entirely in a bold face at body size is a heading one level below those.
Boxes that start with a bullet glyph become list items. A box is split where its lines'
typography changes (a bold heading set in the same box as its paragraph).

Reading order is by recursive cuts: columns split by a vertical gutter are read one after
another (pdfminer's own order interleaves them), else bands split by a horizontal gap.
Narrow boxes side by side in one band are a row of cells; two or more consecutive rows of
as many cells are a table, kept as Markdown table rows (``a | b``). pdfplumber, measured
(``bench/parsers.py``), finds only the ruled one of the shared tables.

Page furniture (docs/sources.md, "Structure kept"): a page's topmost or bottommost box
that is a page number, or whose text (numbers aside) repeats there on other pages, is
kept out of the text; repeated headers and footers are stored in the metadata.

Pages with a ``/Rotate`` entry are laid out as displayed; when that leaves the text
sideways (characters not upright) the page is laid out again unrotated.

A page that holds an image but (almost) no text, or whose text layer is mostly glyphs
without a Unicode mapping, is a scan: it is rendered (pypdfium2, at its image's
resolution) and read by OCR (``ocr.py``, the ``ocr`` extra). Without the extra such
pages are listed in the document's ``unread_pages``, and a PDF made only of them fails
naming the extra.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flexmatch.errors import EncryptedDocumentError, MissingExtraError
from flexmatch.inputs.parsing import ocr
from flexmatch.inputs.parsing._common import (
    ElementBuilder,
    clean_inline,
    finish,
    meaningful_title,
    parse_errors,
    split_list_lines,
)
from flexmatch.models import Element, Location, ParsedDocument

if TYPE_CHECKING:
    from pdfminer.layout import LTPage

HEADING_RATIO = 1.15  # a heading's characters are at least this much larger than body text
MAX_HEADING_CHARS = 200
MAX_HEADING_WORDS = 20
MAX_HEADING_LINES = 3
_CID = re.compile(r"\(cid:\d+\)")  # glyphs pdfminer could not map to text
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_UNMAPPED = re.compile(r"\(cid:\d+\)|[\ufffd\ue000-\uf8ff\x00-\x08\x0e-\x1f]")
MIN_PAGE_CHARS = 20  # a page with an image and fewer readable characters is a scan
MAX_UNMAPPED = 0.3  # a text layer with more glyphs than this unmapped is garbage
# a scan is rendered at its images' own resolution within these bounds (an upscaled scan
# reads worse: a 72 ppi table lost most of its rows at 300 dpi), a page of unmapped
# glyphs at 150 dpi (as accurate as 300 on the shared PDFs, at half the time: bench/ocr.py)
MIN_DPI, MAX_DPI, TEXT_DPI = 72, 300, 150
_DIGITS = re.compile(r"\d+")
_PAGE_NUMBER = re.compile(r"[\W_]*(?:page\s*)?\d+(?:\s*(?:of|/)\s*\d+)?[\W_]*", re.IGNORECASE)
COLUMN_SHARE = 0.3  # a column holds text at least this share of the page wide
_OVERLAP = 1.0  # points two boxes may overlap and still count as separated


@dataclass
class _Box:
    """One text box of a page with the typography facts heading detection needs."""

    page: int
    lines: list[str]
    size: float  # average character size
    bold: bool  # every character in a bold face
    bbox: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # x0, y0, x1, y1
    cells: tuple[str, ...] = ()  # a row of side-by-side cells (a table row, if repeated)


def _line_runs(lines: list[Any]) -> list[list[tuple[Any, list[Any]]]]:
    """A box's lines (each with its characters) in runs of one typography: a bold or
    larger first line (a heading) set in the same box as its paragraph is split off."""
    from pdfminer.layout import LTChar, LTTextLine

    runs: list[list[tuple[Any, list[Any]]]] = []
    previous: tuple[int, bool] | None = None
    for line in lines:
        if not isinstance(line, LTTextLine):
            continue
        chars = [c for c in line if isinstance(c, LTChar) and c.get_text().strip()]
        if not chars:
            continue
        face = (
            round(sum(c.size for c in chars) / len(chars)),
            all(_BOLD.search(c.fontname or "") for c in chars),
        )
        if face != previous or not runs:
            runs.append([])
        runs[-1].append((line, chars))
        previous = face
    return runs


def _boxes(layout: LTPage, page: int) -> list[_Box]:
    """Text boxes of a laid-out page (also inside figures), split where the typography
    changes, in reading order (``_reading_order``)."""
    from pdfminer.layout import LTFigure, LTTextBox, LTTextLine

    boxes: list[_Box] = []

    def visit(container: Any) -> None:
        for item in container:
            if isinstance(item, LTTextBox | LTTextLine):
                lines = [item] if isinstance(item, LTTextLine) else list(item)
                for run in _line_runs(lines):
                    chars = [c for _, line_chars in run for c in line_chars]
                    texts = [_CID.sub("", line.get_text()) for line, _ in run]
                    if not any(t.strip() for t in texts):
                        continue
                    boxes.append(
                        _Box(
                            page=page,
                            lines=[t for t in texts if t.strip()],
                            size=sum(c.size for c in chars) / len(chars),
                            bold=all(_BOLD.search(c.fontname or "") for c in chars),
                            bbox=(
                                min(line.x0 for line, _ in run),
                                min(line.y0 for line, _ in run),
                                max(line.x1 for line, _ in run),
                                max(line.y1 for line, _ in run),
                            ),
                        )
                    )
            elif isinstance(item, LTFigure):
                visit(item)

    visit(layout)
    return _reading_order(boxes, layout.width)


def _groups(boxes: list[_Box], axis: int) -> list[list[_Box]]:
    """Boxes in groups separated by a clear gap along one axis (0: x, left to right;
    1: y, top to bottom)."""
    if axis == 0:
        spans = sorted(((b.bbox[0], b.bbox[2]), i) for i, b in enumerate(boxes))
    else:
        spans = sorted(((-b.bbox[3], -b.bbox[1]), i) for i, b in enumerate(boxes))
    groups: list[list[_Box]] = []
    end = float("-inf")
    for (start, stop), index in spans:
        if not groups or start > end - _OVERLAP:
            groups.append([])
        groups[-1].append(boxes[index])
        end = max(end, stop) if len(groups[-1]) > 1 else stop
    return groups


def _reading_order(boxes: list[_Box], width: float) -> list[_Box]:
    """Boxes in reading order by recursive cuts: columns (groups split by a vertical
    gutter, each holding text at least ``COLUMN_SHARE`` of the page wide) are read one
    after another, left to right; else bands split by a horizontal gap, top to bottom.
    Side-by-side narrow one-line boxes in one band (table cells) become one row of cells."""
    if len(boxes) <= 1:
        return boxes
    columns = _groups(boxes, 0)
    wide = all(max(b.bbox[2] - b.bbox[0] for b in g) >= COLUMN_SHARE * width for g in columns)
    if len(columns) > 1 and wide:
        return [b for g in columns for b in _reading_order(g, width)]
    bands = _groups(boxes, 1)
    if len(bands) > 1:
        return [b for g in bands for b in _reading_order(g, width)]
    if len(columns) > 1 and all(len(b.lines) == 1 for b in boxes):  # not lines of a block
        cells = tuple(
            clean_inline(" ".join(line for b in _reading_order(g, width) for line in b.lines))
            for g in columns
        )
        first = columns[0][0]
        return [
            _Box(
                page=first.page,
                lines=[" ".join(cells)],
                size=first.size,
                bold=all(b.bold for b in boxes),
                bbox=(
                    min(b.bbox[0] for b in boxes),
                    min(b.bbox[1] for b in boxes),
                    max(b.bbox[2] for b in boxes),
                    max(b.bbox[3] for b in boxes),
                ),
                cells=cells,
            )
        ]
    return sorted(boxes, key=lambda b: (-b.bbox[3], b.bbox[0]))


def _upright_share(layout: LTPage) -> float:
    """Share of the page's characters that are upright (1.0 for a page without text)."""
    from pdfminer.layout import LTChar, LTContainer

    upright = total = 0
    stack: list[Any] = [layout]
    while stack:
        item = stack.pop()
        if isinstance(item, LTChar):
            total += 1
            upright += bool(item.upright)
        elif isinstance(item, LTContainer):
            stack.extend(item)
    return upright / total if total else 1.0


def _scan_dpi(layout: LTPage) -> int | None:
    """The resolution to render a scanned page at for OCR, or None for a page that is no
    scan. A scan: an image and almost no text, or a text layer of unmapped glyphs."""
    from pdfminer.layout import LTChar, LTContainer, LTImage

    readable = unmapped = 0
    resolutions: list[float] = []
    stack: list[Any] = [layout]
    while stack:
        item = stack.pop()
        if isinstance(item, LTChar):
            text = item.get_text()
            bad = len(_UNMAPPED.findall(text))
            unmapped += bad
            readable += bool(text.strip()) and not bad
        elif isinstance(item, LTImage):
            shown = max(item.width, item.height) / 72  # inches; the image may be turned
            pixels = max(item.srcsize or (0, 0), key=lambda n: n or 0) or 0
            if shown > 0.5 and pixels:
                resolutions.append(pixels / shown)
        elif isinstance(item, LTContainer):
            stack.extend(item)
    dpi = round(min(max(max(resolutions, default=TEXT_DPI), MIN_DPI), MAX_DPI))
    if readable + unmapped and unmapped / (readable + unmapped) > MAX_UNMAPPED:
        return dpi
    return dpi if resolutions and readable < MIN_PAGE_CHARS else None


def _ocr_pages(data: bytes, scans: dict[int, int], log: ocr.OcrLog) -> dict[int, Any]:
    """The elements OCR reads on each scanned page (number → dpi), rendered by pypdfium2."""
    from flexmatch.extras import require

    pdfium = require("pypdfium2", "ocr", ocr.PURPOSE)
    found: dict[int, Any] = {}
    document = pdfium.PdfDocument(data)
    try:
        for number, dpi in scans.items():
            page = document[number - 1]
            bitmap = page.render(scale=dpi / 72, grayscale=True)
            builder = ElementBuilder()
            ocr.read_image(bitmap.to_pil(), builder, log, Location(page=number))
            found[number] = builder.elements
            page.close()
    finally:
        document.close()
    return found


def _weighted_median(weights: Counter[float]) -> float:
    """Median character size, counting every character (not every box) once."""
    half = sum(weights.values()) / 2
    seen = 0
    for size in sorted(weights):
        seen += weights[size]
        if seen >= half:
            return size
    return max(weights)


def _is_heading_text(box: _Box, text: str) -> bool:
    return (
        len(text) <= MAX_HEADING_CHARS
        and len(text.split()) <= MAX_HEADING_WORDS
        and len(box.lines) <= MAX_HEADING_LINES
        and any(ch.isalpha() for ch in text)
    )


def _heading_levels(boxes: list[_Box]) -> dict[int, int]:
    """Map box index → heading level, from font size (levels 1-2) and bold (next level)."""
    weights: Counter[float] = Counter()
    for box in boxes:
        weights[round(box.size, 1)] += sum(len(t.strip()) for t in box.lines)
    if not weights:
        return {}
    body = _weighted_median(weights)
    texts = [clean_inline(" ".join(b.lines)) for b in boxes]
    large = {
        i: round(b.size)
        for i, b in enumerate(boxes)
        if b.size >= body * HEADING_RATIO and b.size - body >= 1 and _is_heading_text(b, texts[i])
    }
    ranks = sorted(set(large.values()), reverse=True)
    levels = {i: 1 if size == ranks[0] else 2 for i, size in large.items()}
    bold_level = min(len(set(levels.values())) + 1, 3)
    for i, box in enumerate(boxes):
        text = texts[i]
        if (
            i not in levels
            and box.bold
            and box.size >= body * 0.95
            and len(box.lines) <= 2
            and len(text.split()) <= 12
            and not text.endswith((".", ",", ";"))
            and _is_heading_text(box, text)
        ):
            levels[i] = bold_level
    return levels


def _pypdf_says_encrypted(data: bytes) -> bool:
    """Second opinion from pypdf when pdfminer fails: does the file need a password?"""
    try:
        from pypdf import PasswordType, PdfReader

        reader = PdfReader(io.BytesIO(data))
        return bool(reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED)
    except Exception:
        return False


def _metadata_title(document: Any) -> str:
    from pdfminer.pdftypes import resolve1
    from pdfminer.utils import decode_text

    for info in document.info or []:
        value = resolve1(info.get("Title")) if isinstance(info, dict) else None
        if isinstance(value, bytes):
            return meaningful_title(decode_text(value))
        if isinstance(value, str):
            return meaningful_title(value)
    return ""


def parse_pdf(path: Path) -> ParsedDocument:
    """Parse a .pdf file: its text layer, and its scanned pages by OCR."""
    from pdfminer.converter import PDFPageAggregator
    from pdfminer.layout import LAParams
    from pdfminer.pdfdocument import PDFDocument, PDFEncryptionError
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdfparser import PDFParser

    data = path.read_bytes()
    encrypted = f"{path}: PDF is encrypted (password protected)"
    boxes: list[_Box] = []
    scanned: dict[int, int] = {}  # page number → dpi to render it at
    pages = 0
    with parse_errors(path, "PDF"):
        try:
            document = PDFDocument(PDFParser(io.BytesIO(data)), password="")
        except PDFEncryptionError as exc:
            raise EncryptedDocumentError(encrypted) from exc
        except Exception as exc:
            if _pypdf_says_encrypted(data):
                raise EncryptedDocumentError(encrypted) from exc
            raise
        resources = PDFResourceManager(caching=True)
        device = PDFPageAggregator(resources, laparams=LAParams())
        interpreter = PDFPageInterpreter(resources, device)
        for number, page in enumerate(PDFPage.create_pages(document), start=1):
            pages = number
            interpreter.process_page(page)
            layout = device.get_result()
            if page.rotate % 360 and _upright_share(layout) < 0.5:
                page.rotate = 0
                interpreter.process_page(page)
                unrotated = device.get_result()
                if _upright_share(unrotated) > _upright_share(layout):
                    layout = unrotated
            dpi = _scan_dpi(layout)
            if dpi is not None:
                scanned[number] = dpi
            else:
                boxes.extend(_boxes(layout, number))
        meta_title = _metadata_title(document)
    log = ocr.OcrLog()
    read: dict[int, list[Element]] = {}
    metadata: dict[str, Any] = {"pages": pages}
    if scanned:
        try:
            with parse_errors(path, "PDF"):
                read = _ocr_pages(data, scanned, log)
        except MissingExtraError as exc:
            if not boxes:
                raise MissingExtraError(f"{path}: no text layer; {exc}") from exc
            metadata["unread_pages"] = list(scanned)

    boxes, furniture = _drop_furniture(boxes)
    metadata.update(furniture)
    builder = ElementBuilder()
    levels = _heading_levels(boxes)
    tables = _table_runs(boxes)
    in_table = {i for start, stop in tables.items() for i in range(start, stop)}
    for i, box in enumerate(boxes):
        while read and min(read) < box.page:  # scanned pages before this one
            builder.elements.extend(read.pop(min(read)))
        if i in tables:
            rows = (
                " | ".join(c.replace("|", "\\|") for c in b.cells) for b in boxes[i : tables[i]]
            )
            builder.add("table", "\n".join(rows), page=box.page)
            continue
        if i in in_table:
            continue
        if i in levels:
            builder.add("heading", " ".join(box.lines), level=levels[i], page=box.page)
            continue
        for kind, text in split_list_lines(box.lines):
            if not _continues(builder.elements, text, box.page):
                builder.add(kind, text, page=box.page)
                continue
            previous = builder.elements.pop()
            builder.add(previous.kind, f"{previous.text} {text}", page=box.page)
    for number in sorted(read):
        builder.elements.extend(read[number])
    title = meta_title or builder.first_text("heading")
    hint = "OCR found no readable text on its scanned pages" if scanned else ""
    metadata.update(log.metadata())
    return finish(path, builder, title or path.stem, metadata, empty_hint=hint)


def _drop_furniture(boxes: list[_Box]) -> tuple[list[_Box], dict[str, list[str]]]:
    """Boxes without page furniture, and the furniture's texts (``page_headers``,
    ``page_footers``, once each; page numbers left out).

    Furniture is the topmost or bottommost box of a page when it is a page number
    (``7``, ``Page 7``, ``7 of 9``) in a document of two or more pages, or when its
    text, digits aside, is at the top (or bottom) of at least two pages and of half the
    pages, and those pages differ otherwise (a duplicated page is no running header).
    """
    pages: dict[int, list[_Box]] = {}
    for box in boxes:
        pages.setdefault(box.page, []).append(box)
    if len(pages) < 2:
        return boxes, {}
    bodies = {n: " ".join(" ".join(b.lines) for b in page) for n, page in pages.items()}
    edges: dict[str, list[tuple[int, _Box]]] = {"page_headers": [], "page_footers": []}
    for number, page in pages.items():
        edges["page_headers"].append((number, max(page, key=lambda b: b.bbox[3])))
        edges["page_footers"].append((number, min(page, key=lambda b: b.bbox[1])))
    dropped: set[int] = set()
    found: dict[str, list[str]] = {}
    for key, candidates in edges.items():
        seen: dict[str, list[int]] = {}
        for number, box in candidates:
            seen.setdefault(_furniture_key(box), []).append(number)
        for _, box in candidates:
            text = clean_inline(" ".join(box.lines))
            on = seen[_furniture_key(box)]
            repeated = len(on) >= max(2, len(pages) / 2) and len({bodies[n] for n in on}) > 1
            if _PAGE_NUMBER.fullmatch(text):
                dropped.add(id(box))
            elif repeated:
                dropped.add(id(box))
                if text not in found.setdefault(key, []):
                    found[key].append(text)
    return [b for b in boxes if id(b) not in dropped], found


def _furniture_key(box: _Box) -> str:
    """A box's text with its numbers blanked: a running header with the page number."""
    return _DIGITS.sub("#", clean_inline(" ".join(box.lines)).lower())


def _table_runs(boxes: list[_Box]) -> dict[int, int]:
    """Runs of at least two consecutive rows with the same number of cells (start index →
    end index): a table, its cells kept paired as Markdown table rows."""
    runs: dict[int, int] = {}
    start = 0
    for i in range(1, len(boxes) + 1):
        same = i < len(boxes) and boxes[i].cells and len(boxes[i].cells) == len(boxes[start].cells)
        if not same:
            if len(boxes[start].cells) >= 2 and i - start >= 2:
                runs[start] = i
            start = i
    return runs


def _continues(elements: list[Element], text: str, page: int) -> bool:
    """True when a box is the wrapped tail of the previous paragraph or list item."""
    if not elements or not text[:1].islower():
        return False
    previous = elements[-1]
    return (
        previous.kind in ("paragraph", "list_item")
        and previous.page == page
        and not previous.text.endswith((".", "!", "?", ":"))
    )
