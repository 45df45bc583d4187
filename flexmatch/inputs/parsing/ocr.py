"""OCR: the text of an image (a scan, a photo of a page, a picture in a Word file).

Tesseract through tesserocr (the ``ocr`` extra; its wheel carries the library) with the
English data of Debian's ``tesseract-ocr-eng``: chosen over RapidOCR by measurement
(``bench/ocr.py``, docs/sources.md), and nothing is downloaded at run time. It runs
in-process, so in a parse worker it is under the worker's time and memory caps and dies
with it. Text comes back as paragraphs in Tesseract's reading order; a short paragraph
set clearly larger than the page's body lines is a heading, as in a PDF.

Every OCR'd element is counted in an ``OcrLog``, which turns into the document's
metadata: ``ocr`` (the engine), ``ocr_confidence`` (mean word confidence, 0-100) and,
the pages (PDF, TIFF) or slides read by OCR, or the number of pictures OCR'd in a Word
file, so a result can say it was read by OCR and how surely.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flexmatch.errors import MissingExtraError
from flexmatch.extras import require
from flexmatch.inputs.parsing._common import ElementBuilder, split_list_lines
from flexmatch.models import Location

if TYPE_CHECKING:
    from PIL.Image import Image

LANGUAGE = "eng"
TESSDATA_DIRS = (
    "/usr/share/tesseract-ocr/5/tessdata",  # Debian 12+, Ubuntu 22.04+
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",  # Fedora, Arch
    "/opt/homebrew/share/tessdata",
    "/usr/local/share/tessdata",
)
MIN_SIDE = 24  # pixels: smaller pictures (bullets, icons) hold no readable text
MIN_CONFIDENCE = 30.0  # a paragraph below this is noise read from a picture, not text
MAX_PIXELS = 60_000_000  # ~ an A4 page at 900 dpi; larger images are scaled down first
HEADING_RATIO = 1.3  # a heading's lines are this much taller than the page's body lines
PURPOSE = "reading scanned pages and images (OCR)"

_local = threading.local()


@dataclass
class OcrLog:
    """What OCR read in one document, for its metadata."""

    words: int = 0
    confidence_sum: float = 0.0
    pages: list[int] = field(default_factory=list)
    slides: list[int] = field(default_factory=list)
    images: int = 0

    def metadata(self, pictures: bool = False) -> dict[str, Any]:
        """``pictures``: the images were pictures in a document of text (Word), so only
        their count says which part was OCR'd; pages and slides say it themselves."""
        if not self.images:
            return {}
        meta: dict[str, Any] = {"ocr": engine_name()}
        meta["ocr_confidence"] = round(self.confidence_sum / self.words) if self.words else 0
        if self.pages:
            meta["ocr_pages"] = sorted(set(self.pages))
        if self.slides:
            meta["ocr_slides"] = sorted(set(self.slides))
        if pictures:
            meta["ocr_pictures"] = self.images
        return meta


@dataclass
class _Paragraph:
    lines: list[str]
    height: float  # median line height in pixels
    confidence: float
    words: int


def tessdata_dir() -> str:
    """The folder holding ``eng.traineddata``: ``$TESSDATA_PREFIX``, else the usual places."""
    for folder in (os.environ.get("TESSDATA_PREFIX", ""), *TESSDATA_DIRS):
        if folder and (Path(folder) / f"{LANGUAGE}.traineddata").is_file():
            return folder.rstrip("/") + "/"
    raise MissingExtraError(
        f"{PURPOSE} needs Tesseract's English data ({LANGUAGE}.traineddata), found in none of "
        f"{', '.join(TESSDATA_DIRS)}: install it (Debian/Ubuntu: apt-get install "
        "tesseract-ocr-eng) or set TESSDATA_PREFIX to its folder"
    )


def _api() -> Any:
    """This thread's Tesseract instance (loading the data takes ~0.2 s: kept per worker)."""
    api = getattr(_local, "api", None)
    if api is None:
        tesserocr = require("tesserocr", "ocr", PURPOSE)
        api = tesserocr.PyTessBaseAPI(path=tessdata_dir(), lang=LANGUAGE)
        _local.api = api
    return api


def ensure() -> None:
    """Raise ``MissingExtraError`` (naming the extra or the language data) when OCR
    cannot run here."""
    _api()


def available() -> bool:
    """True when OCR can run here (the extra and the language data are installed)."""
    try:
        ensure()
    except MissingExtraError:
        return False
    return True


def engine_name() -> str:
    tesserocr = require("tesserocr", "ocr", PURPOSE)
    first = str(tesserocr.tesseract_version()).splitlines()[0]  # "tesseract 5.5.1"
    return first.replace("tesseract", "Tesseract", 1)


def _prepared(image: Image) -> Image:
    """Grayscale, transparency on white, and no bigger than ``MAX_PIXELS``."""
    from PIL import Image as PILImage

    if image.mode in ("RGBA", "LA", "P"):
        image = image.convert("RGBA")
        background = PILImage.new("RGBA", image.size, "white")
        image = PILImage.alpha_composite(background, image)
    image = image.convert("L")
    pixels = image.width * image.height
    if pixels > MAX_PIXELS:
        scale = (MAX_PIXELS / pixels) ** 0.5
        image = image.resize((max(1, int(image.width * scale)), max(1, int(image.height * scale))))
    return image


def _paragraphs(image: Image) -> list[_Paragraph]:
    """Tesseract's paragraphs of ``image`` with their line heights and word confidences."""
    tesserocr = require("tesserocr", "ocr", PURPOSE)
    api = _api()
    api.SetImage(_prepared(image))
    api.Recognize()
    level = tesserocr.RIL
    found: list[_Paragraph] = []
    iterator = api.GetIterator()
    if iterator is None:
        return found
    current: _Paragraph | None = None
    while True:
        if iterator.IsAtBeginningOf(level.PARA) or current is None:
            current = _Paragraph([], 0.0, 0.0, 0)
            found.append(current)
        if iterator.IsAtBeginningOf(level.TEXTLINE):
            box = iterator.BoundingBox(level.TEXTLINE)
            text = _text(iterator, level.TEXTLINE)
            if box is not None and text.strip():
                current.lines.append(text.strip())
                current.height += box[3] - box[1]
        if _text(iterator, level.WORD).strip():
            current.confidence += iterator.Confidence(level.WORD)
            current.words += 1
        if not iterator.Next(level.WORD):
            break
    for paragraph in found:
        if paragraph.lines:
            paragraph.height /= len(paragraph.lines)
    return [p for p in found if p.lines and p.words]


def _text(iterator: Any, level: int) -> str:
    """The text at the iterator ("" where Tesseract found none: it raises there)."""
    try:
        return str(iterator.GetUTF8Text(level) or "")
    except RuntimeError:
        return ""


def read_image(
    image: Image, builder: ElementBuilder, log: OcrLog, location: Location | None = None
) -> None:
    """Add the text OCR finds in ``image`` to ``builder``, each element at ``location``
    (tiny pictures are skipped)."""
    if min(image.width, image.height) < MIN_SIDE:
        return
    paragraphs = [p for p in _paragraphs(image) if p.confidence / p.words >= MIN_CONFIDENCE]
    if not paragraphs:
        return
    log.images += 1
    if location is not None and location.page is not None:
        log.pages.append(location.page)
    if location is not None and location.slide is not None:
        log.slides.append(location.slide)
    heights = sorted(h for p in paragraphs for h in [p.height] * len(p.lines))
    body = heights[len(heights) // 2]
    for paragraph in paragraphs:
        log.words += paragraph.words
        log.confidence_sum += paragraph.confidence
        text = " ".join(paragraph.lines)
        words = text.split()
        if (
            paragraph.height >= body * HEADING_RATIO
            and len(paragraph.lines) <= 2
            and len(words) <= 15
            and 2 * sum(any(ch.isalpha() for ch in word) for word in words) > len(words)
        ):
            builder.add("heading", text, level=1, location=location)
            continue
        for kind, part in split_list_lines(paragraph.lines):
            builder.add(kind, part, location=location)


def read_bytes(
    data: bytes, builder: ElementBuilder, log: OcrLog, location: Location | None = None
) -> None:
    """OCR an image held in memory (a picture inside a Word or PowerPoint file); an image
    Pillow cannot open (a vector WMF/EMF drawing, say) is left out."""
    import io

    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    try:
        with PILImage.open(io.BytesIO(data)) as image:
            image.load()
            picture = image.copy()
    except (UnidentifiedImageError, OSError, ValueError):
        return
    read_image(picture, builder, log, location)
