"""OCR: scans, photos of pages and pictures in documents are read and found.

Scans are made here from the sample PDFs: a page rendered by poppler's ``pdftoppm`` and
wrapped into an image-only PDF by Pillow, or roughed up into a "photo" (tilted, blurred,
on a grey background, saved as a lossy JPEG).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageFilter

from flexmatch.errors import MissingExtraError, ParseError
from flexmatch.inputs.parsing import ocr, parse_file
from tests.conftest import DOCS, run

MEMO = DOCS / "pdf_fake-memo.pdf"  # "... 10,000 blankets, and 200 laptops delivered ..."
STORY = DOCS / "pdf_DA-1p.pdf"  # "... perched atop the spire of the village chantry ..."


def render(pdf: Path, folder: Path, dpi: int = 200, page: int = 1) -> Path:
    """One page of ``pdf`` as a PNG, by poppler's pdftoppm."""
    stem = folder / f"{pdf.stem}-{page}-{dpi}"
    subprocess.run(
        ["pdftoppm", "-png", "-r", str(dpi), "-f", str(page), "-l", str(page), "-singlefile",
         str(pdf), str(stem)],
        check=True,
    )  # fmt: skip
    return stem.with_suffix(".png")


def image_only_pdf(pdf: Path, folder: Path, name: str) -> Path:
    """A scan: ``pdf``'s first page as a picture in a PDF without any text layer."""
    target = folder / name
    with Image.open(render(pdf, folder)) as page:
        page.convert("RGB").save(target, "PDF", resolution=200)
    return target


def photo(pdf: Path, folder: Path, name: str) -> Path:
    """A phone-camera "photo" of ``pdf``'s first page: tilted, soft, grey, JPEG."""
    with Image.open(render(pdf, folder, dpi=220)) as page:
        shot = page.convert("L").rotate(1.5, expand=True, fillcolor=150)
        shot = shot.filter(ImageFilter.GaussianBlur(0.8)).point(lambda v: 40 + v * 0.75)
        target = folder / name
        shot.save(target, "JPEG", quality=70)
    return target


@pytest.fixture
def no_ocr(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as if the 'ocr' extra were not installed."""
    monkeypatch.setitem(sys.modules, "tesserocr", None)  # import fails
    monkeypatch.setattr(ocr, "_local", type(ocr._local)())  # no Tesseract loaded yet


def test_a_scanned_pdf_and_a_photo_of_a_page_are_found_through_the_cli(tmp_path: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    image_only_pdf(MEMO, tmp_path, "delivery-scan.pdf").rename(folder / "delivery-scan.pdf")
    photo(STORY, tmp_path, "story.jpg").rename(folder / "story.jpg")
    (folder / "notes.md").write_text("# Notes\n\nThe garden needs water in August.\n")
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    ingest = run("ingest", "--kb", str(kb), "--json", str(folder))
    assert ingest.returncode == 0, ingest.stderr
    report = json.loads(ingest.stdout)
    assert report["documents"] == 3 and report["failed"] == [], report

    def first(question: str) -> dict:
        result = run("query", "--kb", str(kb), "--json", "--top-n", "3", question)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["results"][0]

    scan = first("how many blankets were delivered")
    assert scan["uri"].endswith("delivery-scan.pdf")
    assert "10,000 blankets" in scan["content"]
    assert scan["cite"] == "delivery-scan.pdf p. 1"
    meta = scan["metadata"]
    assert meta["ocr"].startswith("Tesseract") and meta["ocr_pages"] == [1]
    assert meta["ocr_confidence"] >= 80

    story = first("the mage perched atop the spire of the village chantry")
    assert story["uri"].endswith("story.jpg")
    assert "chantry" in story["content"]
    assert story["metadata"]["ocr"].startswith("Tesseract")
    assert 50 <= story["metadata"]["ocr_confidence"] <= 100


def test_a_pdf_mixing_text_and_scanned_pages_reads_both_in_page_order(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(PdfReader(DOCS / "pdf_header-test-doc.pdf"))  # a text layer
    writer.append(PdfReader(image_only_pdf(MEMO, tmp_path, "scan.pdf")))  # a scan
    mixed = tmp_path / "mixed.pdf"
    writer.write(mixed)
    document = parse_file(mixed)
    texts = [(e.page, e.text) for e in document.elements]
    assert texts[0][0] == 1 and any("lovely sentences" in t for _, t in texts)
    scanned = [t for page, t in texts if page == 2]
    assert any("10,000 blankets" in t for t in scanned), texts
    assert all(page is not None for page, _ in texts)
    assert [p for p, _ in texts] == sorted(p for p, _ in texts)  # page order kept
    assert document.metadata["ocr_pages"] == [2]


def test_a_picture_of_text_in_a_word_file_is_read_where_it_stands(tmp_path: Path) -> None:
    import docx

    word = docx.Document()
    word.add_paragraph("Before the picture.")
    word.add_picture(str(render(MEMO, tmp_path, dpi=150)))
    word.add_paragraph("After the picture.")
    path = tmp_path / "with-picture.docx"
    word.save(str(path))
    document = parse_file(path)
    texts = [e.text for e in document.elements]
    memo = next(i for i, t in enumerate(texts) if "10,000 blankets" in t)
    assert texts[0] == "Before the picture." and texts[-1] == "After the picture."
    assert 0 < memo < len(texts) - 1
    assert document.metadata["ocr_pictures"] == 1
    assert document.metadata["ocr_confidence"] >= 80


def test_a_picture_of_text_on_a_slide_is_read_with_its_slide(tmp_path: Path) -> None:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Deliveries"
    slide.shapes.add_picture(str(render(MEMO, tmp_path, dpi=150)), Inches(0.5), Inches(1.5))
    path = tmp_path / "deck.pptx"
    deck.save(str(path))
    document = parse_file(path)
    read = [e for e in document.elements if "10,000 blankets" in e.text]
    assert read and read[0].location is not None and read[0].location.slide == 1
    assert document.metadata["ocr_slides"] == [1]


def test_without_the_extra_a_scan_only_pdf_fails_naming_it(tmp_path: Path, no_ocr: None) -> None:
    scan = tmp_path / "scan.pdf"
    Image.new("RGB", (300, 400), "white").save(scan, "PDF")
    with pytest.raises(MissingExtraError, match=r"scan\.pdf: no text layer; .*flexmatch\[ocr\]"):
        parse_file(scan)


def test_without_the_extra_a_word_file_keeps_its_text(tmp_path: Path, no_ocr: None) -> None:
    import docx

    picture = io.BytesIO()
    Image.new("L", (200, 100), 255).save(picture, "PNG")
    word = docx.Document()
    word.add_paragraph("Text around a picture.")
    word.add_picture(picture)
    path = tmp_path / "picture.docx"
    word.save(str(path))
    document = parse_file(path)
    assert [e.text for e in document.elements] == ["Text around a picture."]
    assert "ocr" not in document.metadata


def test_an_image_without_text_is_empty_not_noise(tmp_path: Path) -> None:
    picture = tmp_path / "sky.png"
    Image.radial_gradient("L").resize((400, 400)).save(picture)
    with pytest.raises(ParseError, match=r"sky\.png: no text found \(OCR found no readable text"):
        parse_file(picture)


def test_ocr_runs_under_the_workers_time_cap(tmp_path: Path) -> None:
    """A huge scan is stopped at the parse timeout like any parse, and the pool goes on."""
    from flexmatch.inputs.isolation import IsolatedPool

    with Image.open(render(STORY, tmp_path, dpi=150)) as page:
        big = Image.new("L", (page.width * 4, page.height * 4), 255)
        for row in range(4):
            for column in range(4):
                big.paste(page.convert("L"), (column * page.width, row * page.height))
    huge = tmp_path / "wall.png"
    big.save(huge)
    small = tmp_path / "memo.png"
    Image.open(render(MEMO, tmp_path, dpi=150)).save(small)
    pool = IsolatedPool(workers=1, timeout=1.0)
    try:
        with pytest.raises(ParseError, match=r"wall\.png: parsing took longer than 1s .*parse_tim"):
            pool.run(parse_file, huge, label=str(huge))
        done = pool.run(parse_file, small, label=str(small), timeout=60)
        assert any("10,000 blankets" in e.text for e in done.elements)
    finally:
        pool.close()


@pytest.mark.parametrize(
    ("metadata", "location", "shown"),
    [
        ({}, None, ""),  # most documents: nothing said, and no missing key fails the page
        ({"author": "A"}, {"page": 2}, ""),
        ({"ocr": "Tesseract 5", "ocr_confidence": 91}, None, "Read by OCR (Tesseract 5, 91%)"),
        ({"ocr": "Tesseract 5", "ocr_confidence": 88, "ocr_pages": [2]}, {"page": 2}, "Read by"),
        ({"ocr": "Tesseract 5", "ocr_confidence": 88, "ocr_pages": [2]}, {"page": 1}, ""),
        ({"ocr": "T", "ocr_confidence": 70, "ocr_slides": [3]}, {"slide": 3}, "on this slide"),
        ({"ocr": "T", "ocr_confidence": 70, "ocr_pictures": 2}, None, "2 pictures in this"),
    ],
)
def test_the_console_says_which_chunks_ocr_read(
    metadata: dict, location: dict | None, shown: str
) -> None:
    from flexmatch.adapters.http.console.web import make_environment
    from flexmatch.models import Location

    macro = make_environment().get_template("_ocr.html").module.ocr_note  # type: ignore[attr-defined]
    where = Location(**location) if location else None
    html = str(macro(metadata, where)).replace("confidence ", "")
    assert (shown in html) if shown else html.strip() == "", html


def test_every_page_of_a_tiff_and_a_sideways_photo_are_read(tmp_path: Path) -> None:
    """A scanner's multi-page TIFF: each frame its own page. A phone's portrait photo is
    stored sideways with an EXIF orientation saying so: it is read upright."""
    with (
        Image.open(render(MEMO, tmp_path, dpi=150)) as memo,
        Image.open(render(DOCS / "pdf_header-test-doc.pdf", tmp_path, dpi=150)) as second,
    ):
        scan = tmp_path / "scan.tiff"
        memo.convert("L").save(scan, save_all=True, append_images=[second.convert("L")])
        sideways = tmp_path / "portrait.jpg"
        exif = Image.Exif()
        exif[0x0112] = 6  # Orientation: turn 90° clockwise to view
        memo.convert("L").rotate(90, expand=True).save(sideways, exif=exif, quality=90)
    document = parse_file(scan)
    pages = {e.location.page for e in document.elements if e.location is not None}
    assert pages == {1, 2} and document.metadata["pages"] == 2
    assert document.metadata["ocr_pages"] == [1, 2]
    assert any("lovely sentences" in e.text for e in document.elements)
    upright = parse_file(sideways)
    assert any("10,000 blankets" in e.text for e in upright.elements)


def test_a_scan_under_a_garbage_text_layer_is_read_by_ocr(tmp_path: Path) -> None:
    """A scanned page whose hidden text layer maps every glyph to private-use code points
    (a broken OCR layer, a font without a Unicode map): OCR reads it, the garbage goes."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import (
        ArrayObject,
        DecodedStreamObject,
        DictionaryObject,
        NameObject,
        NumberObject,
    )

    names = [NameObject(f"/uniE0{i:02X}") for i in range(26)]  # A-Z → U+E000-U+E019
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
            NameObject("/Encoding"): DictionaryObject(
                {NameObject("/Differences"): ArrayObject([NumberObject(65), *names])}
            ),
        }
    )
    layer = PdfWriter().add_blank_page(612, 792)
    plain = DictionaryObject({**font, NameObject("/Encoding"): NameObject("/WinAnsiEncoding")})
    layer[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F9"): font, NameObject("/F1"): plain})}
    )
    text = DecodedStreamObject()  # readable text too: only the garbage rule calls for OCR
    text.set_data(
        b"BT /F1 8 Tf 72 40 Td (Scanned by the office scanner on floor two) Tj ET "
        b"BT /F9 11 Tf 3 Tr 72 700 Td (" + b"ABCDEFGHIJ KLMNOP QRSTUV " * 4 + b") Tj ET"
    )
    layer.replace_contents(text)
    writer = PdfWriter()
    writer.append(PdfReader(image_only_pdf(MEMO, tmp_path, "scan.pdf")))
    writer.pages[0].merge_page(layer)
    broken = tmp_path / "broken-layer.pdf"
    writer.write(broken)

    document = parse_file(broken)
    assert document.metadata["ocr_pages"] == [1]
    assert any("10,000 blankets" in e.text for e in document.elements)
    assert document.text.count("floor two") == 1  # read once, by OCR: the layer is left
    assert not any("\ue000" <= ch <= "\uf8ff" for e in document.elements for ch in e.text)


def test_without_the_extra_a_pdf_keeps_its_text_pages_and_lists_the_rest(
    tmp_path: Path, no_ocr: None
) -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(PdfReader(DOCS / "pdf_header-test-doc.pdf"))
    writer.append(PdfReader(image_only_pdf(MEMO, tmp_path, "scan.pdf")))
    mixed = tmp_path / "mixed.pdf"
    writer.write(mixed)
    document = parse_file(mixed)
    assert any("lovely sentences" in e.text for e in document.elements)
    assert document.metadata["unread_pages"] == [2] and "ocr" not in document.metadata
