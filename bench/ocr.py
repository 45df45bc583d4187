"""OCR engines compared: character error rate against the PDFs' own text layer, and speed.

Every page of the sample PDFs (``tests/data/docs``) is rendered to a grayscale image
(poppler's ``pdftoppm``, and pypdfium2 for the renderer's speed) at 150 and 300 dpi and
read by each engine that is installed; the reference is the page's text layer
(``pdftotext``). Whitespace is collapsed and Unicode folded (NFKC) on both sides before
the edit distance, so the rate counts wrong, missing and extra characters, not layout.
Rows come out for the engines that import:

- ``tesserocr``: Tesseract's library in-process (Debian ``tesseract-ocr-eng`` data);
- ``pytesseract``: the ``tesseract`` command, one process per page;
- ``rapidocr``: RapidOCR 3 on ONNX Runtime (PP-OCR models inside its wheel);
- ``rapidocr-onnxruntime``: RapidOCR 1.4 (PP-OCRv4 models inside its wheel).

Pages per second are wall-clock time on this machine (both engines use every core); CPU
seconds per page add up the time of all their threads (and of the ``tesseract`` command
pytesseract runs), and are steadier on a busy machine.

Run:  .venv/bin/python bench/ocr.py [--data tests/data/docs] [--dpi 150 300]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TESSDATA_DIRS = ("/usr/share/tesseract-ocr/5/tessdata", "/usr/share/tesseract-ocr/4.00/tessdata")
Engine = Callable[[Any], str]  # a PIL image in, its text out


def levenshtein(a: str, b: str) -> int:
    """Edit distance by Hyyrö's bit-vector algorithm (whole pages in milliseconds)."""
    if not a:
        return len(b)
    if not b:
        return len(a)
    peq: dict[str, int] = {}
    for i, ch in enumerate(a):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    full = (1 << len(a)) - 1
    top = 1 << (len(a) - 1)
    pv, mv, score = full, 0, len(a)
    for ch in b:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = (mv | ~(xh | pv)) & full
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = ((ph << 1) | 1) & full
        mh = (mh << 1) & full
        pv = (mh | ~(xv | ph)) & full
        mv = ph & xv
    return score


def word_recall(reference: str, text: str) -> tuple[int, int]:
    """(reference words found in ``text``, reference words), each occurrence once, in any
    order: recognition alone, where the error rate also counts a different reading order
    (table cells, columns)."""
    found = Counter(text.lower().split())
    wanted = Counter(reference.lower().split())
    return sum((wanted & found).values()), sum(wanted.values())


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


@dataclass
class Page:
    pdf: Path
    number: int
    reference: str
    images: dict[int, Any] = field(default_factory=dict)  # dpi -> PIL image


def pages_of(folder: Path) -> list[Page]:
    """Every page with a text layer of every readable PDF in ``folder``."""
    pages = []
    for pdf in sorted(folder.glob("*.pdf")):
        info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True)
        found = re.search(r"^Pages:\s+(\d+)", info.stdout, re.MULTILINE)
        if info.returncode or not found:
            continue  # encrypted
        for number in range(1, int(found.group(1)) + 1):
            text = subprocess.run(
                ["pdftotext", "-f", str(number), "-l", str(number), str(pdf), "-"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            if normalise(text):
                pages.append(Page(pdf, number, normalise(text)))
    return pages


def render_pdftoppm(page: Page, dpi: int, folder: Path) -> Any:
    from PIL import Image

    stem = folder / f"{page.pdf.stem}-{page.number}-{dpi}"
    subprocess.run(
        ["pdftoppm", "-gray", "-png", "-r", str(dpi), "-f", str(page.number), "-l",
         str(page.number), "-singlefile", str(page.pdf), str(stem)],
        check=True,
    )  # fmt: skip
    with Image.open(f"{stem}.png") as image:
        return image.copy()


def render_pdfium(page: Page, dpi: int) -> Any:
    import pypdfium2

    document = pypdfium2.PdfDocument(str(page.pdf))
    try:
        return document[page.number - 1].render(scale=dpi / 72, grayscale=True).to_pil()
    finally:
        document.close()


def tessdata() -> str:
    """Tesseract's language data: $TESSDATA_PREFIX, else where Debian puts it."""
    for folder in [os.environ.get("TESSDATA_PREFIX", ""), *TESSDATA_DIRS]:
        if folder and (Path(folder) / "eng.traineddata").is_file():
            return folder.rstrip("/") + "/"
    return "./"


def engines() -> dict[str, Engine]:
    """The installed engines, each set up once (model and data loading is not timed)."""
    found: dict[str, Engine] = {}
    try:
        import tesserocr

        api = tesserocr.PyTessBaseAPI(path=tessdata(), lang="eng")

        def run_tesserocr(image: Any) -> str:
            api.SetImage(image)
            return str(api.GetUTF8Text())

        found["tesserocr"] = run_tesserocr
    except (ImportError, RuntimeError) as exc:
        print(f"tesserocr: not measured ({exc})")
    try:
        import pytesseract

        if shutil.which("tesseract"):
            found["pytesseract"] = lambda image: str(pytesseract.image_to_string(image))
    except ImportError:
        print("pytesseract: not measured (not installed)")
    try:
        import numpy
        from rapidocr import RapidOCR

        rapid3 = RapidOCR()

        def run_rapid3(image: Any) -> str:
            result = rapid3(numpy.asarray(image.convert("RGB")))
            return "\n".join(result.txts or ())

        found["rapidocr"] = run_rapid3
    except ImportError:
        print("rapidocr: not measured (not installed)")
    try:
        import numpy
        from rapidocr_onnxruntime import RapidOCR as RapidOCR1

        rapid1 = RapidOCR1()

        def run_rapid1(image: Any) -> str:
            result, _ = rapid1(numpy.asarray(image.convert("RGB")))
            return "\n".join(line[1] for line in result or ())

        found["rapidocr-onnxruntime"] = run_rapid1
    except ImportError:
        print("rapidocr-onnxruntime: not measured (not installed)")
    return found


def cpu_seconds() -> float:
    """CPU time of this process and of the commands it ran (pytesseract's tesseract)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    default_data = Path(__file__).resolve().parents[1] / "tests" / "data" / "docs"
    parser.add_argument("--data", type=Path, default=default_data)
    parser.add_argument("--dpi", type=int, nargs="+", default=[150, 300])
    args = parser.parse_args()
    pages = pages_of(args.data)
    chars = sum(len(p.reference) for p in pages)
    print(f"{len(pages)} pages with a text layer, {chars} reference characters\n")

    print("| renderer | dpi | pages/s |\n|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for dpi in args.dpi:
            started = time.perf_counter()
            for page in pages:
                page.images[dpi] = render_pdftoppm(page, dpi, Path(folder))
            print(f"| pdftoppm | {dpi} | {len(pages) / (time.perf_counter() - started):.1f} |")
            try:
                started = time.perf_counter()
                for page in pages:
                    render_pdfium(page, dpi)
                print(f"| pypdfium2 | {dpi} | {len(pages) / (time.perf_counter() - started):.1f} |")
            except ImportError:
                pass

    print(
        "\n| engine | dpi | CER | worst page CER | word recall | pages/s | CPU s/page |\n"
        "|---|---|---|---|---|---|---|"
    )
    for name, engine in engines().items():
        for dpi in args.dpi:
            errors = words_found = words = 0
            worst = (0.0, "")
            elapsed = cpu = 0.0
            for page in pages:
                started, started_cpu = time.perf_counter(), cpu_seconds()
                text = normalise(engine(page.images[dpi]))
                elapsed += time.perf_counter() - started
                cpu += cpu_seconds() - started_cpu
                distance = levenshtein(page.reference, text)
                errors += distance
                hit, total = word_recall(page.reference, text)
                words_found, words = words_found + hit, words + total
                rate = distance / len(page.reference)
                if rate > worst[0]:
                    worst = (rate, f"{page.pdf.name} p.{page.number}")
            print(
                f"| {name} | {dpi} | {errors / chars:.3f} | {worst[0]:.2f} ({worst[1]}) "
                f"| {words_found / words:.3f} "
                f"| {len(pages) / elapsed:.2f} | {cpu / len(pages):.2f} |"
            )


if __name__ == "__main__":
    main()
