"""Results say where they come from, end to end: real files ingested by the Python API
with the real local model, queried, and formatted as the JSON tool result and the facts
block every interface (CLI, HTTP, MCP, agent tool) hands on. A man page is cited by its
section, an HTML page without ids by its headings, a plain-text README by the lines
under its underlined headings; and a knowledge base written before these citations gets
them at its next sync, though no file changed."""

from __future__ import annotations

import gzip
import json
import posixpath
import shutil
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.chains.chunker import _budget
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.inputs.parsing import text as text_parser
from flexmatch.inputs.sources import validators
from flexmatch.models import Location, SearchResult
from tests.conftest import run, write_config
from tests.engine.chains.test_locations import MAN_PAGE, NO_IDS, README
from tests.pdfs import COLD_STORE, LETTER, OVERVIEW, STOCK, TITLE, pdf_of

STDLIB = Path(posixpath.__file__).parent


def test_a_pdf_result_cites_its_page_and_a_code_result_its_lines(
    tmp_path: Path, embedder: OnnxEmbedder, docs_dir: Path
) -> None:
    pdf = docs_dir / "pdf_list-item-example.pdf"
    code = STDLIB / "posixpath.py"
    lines = code.read_text(encoding="utf-8").split("\n")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([pdf, code])
        assert report.documents == 2 and not report.failed

        # the answer is on page 2, in the section "Module Three" begun on page 1: the
        # chunk holds page 2's part of it only, and cites that page
        first = kb.query("Which prototyping methodologies?", top_n=3)[0]
        assert first.uri.endswith("pdf_list-item-example.pdf")
        assert "Prototyping methodologies" in first.content
        assert first.location is not None
        assert (first.location.page, first.location.page_end) == (2, None)
        assert first.cite == "pdf_list-item-example.pdf p. 2"

        question = "split a pathname into head and tail"
        found = kb.query(question, top_n=3)
        split = next(r for r in found if r.heading_path[-1:] == ["def split"])
        where = split.location
        assert where is not None and where.line_start and where.line_end
        assert lines[where.line_start - 1] == "def split(p):"
        assert lines[where.line_end - 1] == "    return head, tail"
        assert split.cite == f"posixpath.py:{where.line_start}-{where.line_end}"

        item = json.loads(kb.format(question, [split], "json"))["results"][0]
        assert item["cite"] == split.cite
        assert item["location"] == {"line_start": where.line_start, "line_end": where.line_end}
        facts = kb.format(question, [split], "markdown")
        assert f"cite: {split.cite}" in facts


def three_pages(folder: Path) -> Path:
    """Page 1 a page of text, page 2 a short letter, page 3 a small table: all three fit
    in one chunk, which cited ``pp. 1-3`` for the letter's answer."""
    path = folder / "harbour.pdf"
    path.write_bytes(pdf_of([TITLE + OVERVIEW, LETTER, STOCK]))
    return path


def scanned(pdf: Path, target: Path) -> Path:
    """``pdf``'s pages as pictures (pypdfium2 at 200 dpi) in a PDF without a text layer."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(pdf)
    try:
        images = [page.render(scale=200 / 72, grayscale=True).to_pil() for page in document]
    finally:
        document.close()
    images[0].save(target, "PDF", resolution=200, save_all=True, append_images=images[1:])
    return target


def top(kb: KnowledgeBase, question: str) -> SearchResult:
    return kb.query(question, top_n=3)[0]


@pytest.mark.parametrize("scan", [False, True], ids=["text", "scan"])
def test_a_letter_on_page_2_is_cited_by_page_2_alone(
    tmp_path: Path, embedder: OnnxEmbedder, scan: bool
) -> None:
    pdf = three_pages(tmp_path)
    if scan:
        pdf = scanned(pdf, tmp_path / "harbour-scan.pdf")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([pdf])
        assert report.documents == 1 and not report.failed
        first = top(kb, "When will the Tilburg warehouse close?")
        assert "14 March" in first.content
        assert "fasteners" not in first.content and "Washers" not in first.content
        assert first.cite == f"{pdf.name} p. 2"
        assert first.location == Location(page=2)
        stock = top(kb, "How many washers are in stock?")
        assert stock.cite == f"{pdf.name} p. 3" and "Tilburg" not in stock.content


def test_a_sentence_of_a_paragraph_over_a_page_break_is_cited_by_its_page(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """The chunk of a paragraph the page break cut in two spans both pages; a result that
    matched a sentence on the second cites that page, in every shape a result takes."""
    pdf = tmp_path / "cold-store.pdf"
    pdf.write_bytes(pdf_of(COLD_STORE))
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        assert kb.ingest([pdf]).documents == 1
        question = "How many refrigerated lorries does the loading dock take at a time?"
        first = top(kb, question)
        assert "the frozen goods that the yards order" in first.content  # one paragraph
        assert first.location == Location(page=1, page_end=2)
        assert "loading dock" in first.matched_text
        assert first.matched_location == Location(page=2)
        assert first.cite == "cold-store.pdf p. 2"
        item = json.loads(kb.format(question, [first], "json"))["results"][0]
        assert item["cite"] == "cold-store.pdf p. 2"
        assert item["location"] == {"page": 1, "page_end": 2}
        assert item["matched_location"] == {"page": 2}
        assert "cite: cold-store.pdf p. 2" in kb.format(question, [first], "markdown")
        opening = top(kb, "Where does Harbour Supplies open a cold store?")
        assert opening.chunk_id == first.chunk_id and opening.cite == "cold-store.pdf p. 1"
        # the sentence the page break cut is on both pages
        auction = top(kb, "What stood on the quay where the cold store is built?")
        assert auction.chunk_id == first.chunk_id and auction.cite == "cold-store.pdf pp. 1-2"


def test_a_slide_without_a_title_is_cited_by_its_own_number(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Harbour Supplies"
    first.placeholders[1].text = "Fasteners, fittings and hand tools for shipyards."
    for text in (
        "Our Tilburg warehouse will close for good on 14 March.",
        "Washers: 800 in stock, at 0.02 each.",
    ):
        slide = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title
        box = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(8), Inches(1))
        box.text_frame.text = text
    path = tmp_path / "review.pptx"
    deck.save(str(path))
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        assert kb.ingest([path]).documents == 1
        answer = top(kb, "When will the Tilburg warehouse close?")
        assert answer.cite == "review.pptx slide 2"
        assert "Washers" not in answer.content


# -- formats cited by their sections --------------------------------------------------
needs_groff = pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")


def _folder(root: Path) -> Path:
    folder = root / "docs"
    folder.mkdir()
    (folder / "demo.8.gz").write_bytes(gzip.compress(MAN_PAGE.encode("utf-8")))
    (folder / "guide.html").write_text(NO_IDS, encoding="utf-8")
    (folder / "README").write_text(README, encoding="utf-8")
    return folder


@needs_groff
def test_query_json_cites_the_section_of_a_man_page_and_an_html_heading(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write_config(kb, "sources:\n  default: {}\n")
    done = run("ingest", "--kb", str(kb), str(_folder(tmp_path)))
    assert done.returncode == 0, done.stderr

    def first_cite(question: str) -> str:
        answer = run("query", question, "--kb", str(kb), "--json", "--top-n", "1")
        assert answer.returncode == 0, answer.stderr
        return str(json.loads(answer.stdout)["results"][0]["cite"])

    assert first_cite("What exit status means torn records were left?") == "demo(8) › EXIT CODES"
    assert first_cite("How do I install the ledger on Linux?") == "guide.html › Install › On Linux"
    assert first_cite("Where do I unpack the ledger archive?") in (
        "README:8-11",
        "guide.html › Install",
    )


@needs_groff
def test_a_sync_reads_again_what_older_parsers_read_though_no_file_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: OnnxEmbedder
) -> None:
    """A knowledge base written by the parsers and chunkers before (no sections, no
    underlined headings) is brought up to date by its next sync: the unchanged files are
    read again and chunked again, and their results cite their sections."""
    folder = _folder(tmp_path)
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, f"sources:\n  default:\n    paths: [{folder}]\n")
    with monkeypatch.context() as old:  # the parsers and chunkers of before
        old.setattr(validators, "PARSER_REVISION", 0)
        old.setattr(_budget, "REVISION", 4)
        old.setattr(text_parser, "_underlined", lambda block: None)
        old.setattr("flexmatch.inputs.parsing.man.Location", lambda section: None)
        with KnowledgeBase.open(kb_dir, embedder=embedder) as kb:
            kb.sync()
            before = kb.query("What exit status means torn records were left?", top_n=1)
            assert before[0].cite == "demo.8.gz"
            again = kb.sync()
            assert again.sources[0].report is not None
            assert again.sources[0].report.unchanged == 3  # nothing read again
    with KnowledgeBase.open(kb_dir, embedder=embedder) as kb:
        report = kb.sync().sources[0].report
        assert report is not None and report.changed == 3 and report.unchanged == 0
        after = kb.query("What exit status means torn records were left?", top_n=1)
        assert after[0].cite == "demo(8) › EXIT CODES"
        readme = kb.query("Where do I unpack the ledger archive?", top_n=5)
        assert ["Harbour ledger", "Installing"] in [r.heading_path for r in readme]
        settled = kb.sync().sources[0].report
        assert settled is not None and settled.unchanged == 3 and settled.changed == 0
