"""Image files (PNG, JPEG, TIFF, WebP) read by OCR (``ocr.py``; the ``ocr`` extra).

A photo is turned upright from its EXIF orientation first (a phone stores a portrait shot
sideways and says so there). Every frame of a multi-page TIFF (a scanner's usual output)
is read, its frame number as the page.
"""

from __future__ import annotations

from pathlib import Path

from flexmatch.errors import MissingExtraError
from flexmatch.inputs.parsing import ocr
from flexmatch.inputs.parsing._common import ElementBuilder, finish, parse_errors
from flexmatch.models import Location, ParsedDocument

MAX_FRAMES = 2_000  # a TIFF claiming more pages is refused rather than read for hours


def parse_image(path: Path) -> ParsedDocument:
    """Parse an image file: its text, read by OCR."""
    try:
        ocr.ensure()  # the extra or its data is missing: say so before opening anything
    except MissingExtraError as exc:
        raise MissingExtraError(f"{path}: {exc}") from exc
    from PIL import Image, ImageOps, ImageSequence

    builder = ElementBuilder()
    log = ocr.OcrLog()
    with parse_errors(path, "image"), Image.open(path) as image:
        frames = getattr(image, "n_frames", 1)
        if frames > MAX_FRAMES:
            raise ValueError(f"{frames:,} frames, at most {MAX_FRAMES:,} are read")
        for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
            upright = ImageOps.exif_transpose(frame)
            where = Location(page=number) if frames > 1 else None
            ocr.read_image(upright, builder, log, where)
        size = {"width": image.width, "height": image.height}
    metadata = {**log.metadata(), **size}
    if frames > 1:
        metadata["pages"] = frames
    hint = "OCR found no readable text in the image"
    return finish(path, builder, path.stem, metadata, empty_hint=hint)
