"""Every chunk knows where it is: the chunkers on real files (the Python standard
library's own modules, the sample documents, heading markup as Sphinx and the
Node.js docs write it) give each section its lines, page, slide, sheet rows or fragment,
and keep the headings those files have."""

from __future__ import annotations

import asyncio
import posixpath
import re
import shutil
from pathlib import Path

import pytest

from flexmatch.chains import ChainContext, Chunker, build_chain
from flexmatch.config import ChainRef
from flexmatch.engine.chains.chunker._budget import REVISION
from flexmatch.engine.points import MatchPayload
from flexmatch.inputs.parsing import parse_file
from flexmatch.inputs.sources.files import discover, load
from flexmatch.models import Document, Element, Location, Section, cite
from tests.conftest import DOCS

STDLIB = Path(posixpath.__file__).parent


def _chunker(name: str, **params: object) -> Chunker:
    return build_chain(ChainRef(chain=name, params=dict(params)), Chunker, ChainContext())


def _read(path: Path, tmp_path: Path) -> Document:
    """A file read as a folder walk reads it."""
    folder = tmp_path / "folder"
    folder.mkdir(exist_ok=True)
    shutil.copy(path, folder / path.name)
    tasks, _ = discover([folder], include=[path.name])
    (document,) = load(tasks[0], "default", 10**8)
    assert isinstance(document, Document)
    return document


def _sections(chunker: Chunker, document: Document) -> list[Section]:
    return asyncio.run(chunker.run(document))


def _cite(document: Document, section: Section) -> str:
    return cite(document.uri, document.title, section.location)


def _words(lines: list[str]) -> list[str]:
    return [line.strip() for line in lines if line.strip()]


@pytest.mark.parametrize("module", ["posixpath.py", "uuid.py", "shutil.py"])
@pytest.mark.parametrize("chunker", ["code", "structure"])
def test_code_chunks_cite_the_lines_they_hold(module: str, chunker: str, tmp_path: Path) -> None:
    """Every chunk of a real module names the lines of the file it holds, exactly."""
    path = STDLIB / module
    lines = path.read_text(encoding="utf-8").split("\n")
    sections = _sections(_chunker(chunker), _read(path, tmp_path))
    assert len(sections) > 10
    for section in sections:
        where = section.location
        assert where is not None and where.line_start and where.line_end, section.heading_path
        held = lines[where.line_start - 1 : where.line_end]
        assert _words(section.text.split("\n")) == _words(held), section.heading_path
        assert held[0].strip() and held[-1].strip()  # no blank line at either end


def test_a_code_result_cites_posixpath_split(tmp_path: Path) -> None:
    path = STDLIB / "posixpath.py"
    lines = path.read_text(encoding="utf-8").split("\n")
    document = _read(path, tmp_path)
    (split,) = [
        s for s in _sections(_chunker("code"), document) if s.heading_path[-1:] == ["def split"]
    ]
    first = lines.index("def split(p):") + 1
    last = first + lines[first - 1 :].index("    return head, tail")
    assert _cite(document, split) == f"posixpath.py:{first}-{last}"


def test_a_merged_code_chunk_names_every_symbol_it_holds(tmp_path: Path) -> None:
    document = _read(STDLIB / "uuid.py", tmp_path)
    sections = _sections(_chunker("code"), document)
    (merged,) = [s for s in sections if "def uuid3(" in s.text]
    assert merged.heading_path == ["uuid.py", "uuid3, uuid4"]
    assert "def uuid4(" in merged.text
    for section in sections:  # no chunk hides a top-level function it holds
        for name in re.findall(r"^def (\w+)", section.text, flags=re.MULTILINE):
            assert name in section.heading_path[-1], (name, section.heading_path)


def test_pdf_chunks_cite_their_pages() -> None:
    parsed = parse_file(DOCS / "pdf_list-item-example.pdf")
    document = Document(
        id="d", uri=str(DOCS / "pdf_list-item-example.pdf"), source="s", title=parsed.title,
        elements=parsed.elements,
    )  # fmt: skip
    sections = _sections(_chunker("structure", max_tokens=60, overlap_tokens=0), document)
    pages = {e.text: e.page for e in parsed.elements}
    assert all(s.location and s.location.page for s in sections)
    cites = {_cite(document, s) for s in sections}
    assert "pdf_list-item-example.pdf p. 1" in cites
    # page 2 goes on with the last section of page 1 ("Module Three"), but no paragraph
    # runs over the page break: page 2's items are a chunk of their own, cited by page 2
    assert cites == {"pdf_list-item-example.pdf p. 1", "pdf_list-item-example.pdf p. 2"}
    (second,) = [s for s in sections if s.location and s.location.page == 2]
    assert second.heading_path[-1] == "Module Three: Step 2: Design and Prototyping"
    for section in sections:  # each page cited is one its text is on
        assert section.location is not None
        on = {page for text, page in pages.items() if text in section.text}
        cited = range(
            section.location.page or 0,
            (section.location.page_end or section.location.page or 0) + 1,
        )
        assert on and on <= set(cited), (section.text[:60], on, section.location)


MARKDOWN = """# Setup guide

Read this before you start.

## Installing on Windows
## Installing on Linux

Run the installer from the package manager.

## Removing
"""


def test_a_heading_with_nothing_under_it_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "setup.md"
    path.write_text(MARKDOWN, encoding="utf-8")
    document = _read(path, tmp_path)
    sections = _sections(_chunker("structure"), document)
    found = [(s.heading_path, s.text, _cite(document, s)) for s in sections]
    assert found == [
        (["Setup guide"], "Read this before you start.", "setup.md:3"),
        (["Setup guide"], "Installing on Windows", "setup.md:5"),
        (["Setup guide", "Installing on Linux"], "Run the installer from the package manager.", "setup.md:8"),  # noqa: E501
        (["Setup guide"], "Removing", "setup.md:10"),
    ]  # fmt: skip


def test_markdown_chunks_cite_the_lines_of_a_real_file(tmp_path: Path) -> None:
    path = DOCS / "LICENSE-Apache-2.0.md"
    lines = path.read_text(encoding="utf-8").split("\n")
    document = _read(path, tmp_path)
    sections = _sections(_chunker("structure", max_tokens=80, overlap_tokens=0), document)
    assert len(sections) > 5
    for section in sections:
        where = section.location
        assert where is not None and where.line_start and where.line_end
        held = " ".join(lines[where.line_start - 1 : where.line_end])
        first_words = " ".join(section.text.split()[:3])
        assert first_words.split()[0].strip("*_`") in held, (first_words, where)


# the heading markup of two real generators, as they write it (Sphinx: the Debian Python
# policy; Node.js: its fs API page), permalinks and all
SPHINX = """<html><head><title>Debian Python Policy</title></head><body>
<section id="copyright">
<h2><span class="section-number">1. </span>Copyright<a class="headerlink" href="#copyright" title="Permalink to this heading">¶</a></h2>
<p>Copyright © 1999—2020 Software in the Public Interest</p>
</section>
<section id="completing-the-move-to-python-3">
<h2><span class="section-number">2. </span>Completing the move to Python 3<a class="headerlink" href="#completing-the-move-to-python-3" title="Permalink to this heading">¶</a></h2>
<p>Debian currently supports one Python version.</p>
</section></body></html>"""  # noqa: E501
NODE = """<html><body><div id="apicontent">
<h2>File system<span><a class="mark" href="#file-system" id="file-system">#</a></span><a aria-hidden="true" class="legacy" id="fs_file_system"></a></h2>
<p>The node:fs module enables interacting with the file system.</p>
<h3>Callback API<span><a class="mark" href="#callback-api" id="callback-api">#</a></span><a aria-hidden="true" class="legacy" id="fs_callback_api"></a></h3>
<p>The callback APIs perform all operations asynchronously.</p>
<h3><a href="#empty"></a>Synchronous API</h3>
<p>The synchronous APIs block the event loop.</p>
</div></body></html>"""  # noqa: E501


def test_permalink_anchors_are_dropped_and_fragments_cited(tmp_path: Path) -> None:
    (tmp_path / "python-policy.html").write_text(SPHINX, encoding="utf-8")
    (tmp_path / "fs.html").write_text(NODE, encoding="utf-8")
    policy = _read(tmp_path / "python-policy.html", tmp_path)
    fs = _read(tmp_path / "fs.html", tmp_path)
    found = [
        (s.heading_path, _cite(d, s))
        for d in (policy, fs)
        for s in _sections(_chunker("structure"), d)
    ]
    assert found == [
        (["1. Copyright"], "python-policy.html#copyright"),
        (["2. Completing the move to Python 3"], "python-policy.html#completing-the-move-to-python-3"),  # noqa: E501
        (["File system"], "fs.html#file-system"),
        (["File system", "Callback API"], "fs.html#callback-api"),
        (["File system", "Synchronous API"], "fs.html#empty"),
    ]  # fmt: skip


def test_slides_and_sheet_rows_are_cited(tmp_path: Path) -> None:
    deck = _read(DOCS / "sample-presentation.pptx", tmp_path)
    slides = [_cite(deck, s) for s in _sections(_chunker("structure"), deck)]
    assert "sample-presentation.pptx slide 1" in slides
    assert all(re.fullmatch(r"sample-presentation\.pptx slides? \d+(-\d+)?", c) for c in slides)
    book = _read(DOCS / "stanley-cups.xlsx", tmp_path)
    sheets = [(s.heading_path, _cite(book, s)) for s in _sections(_chunker("structure"), book)]
    assert sheets == [
        (["Stanley Cups"], "stanley-cups.xlsx › Stanley Cups rows 3-5"),
        (["Stanley Cups Since 67"], "stanley-cups.xlsx › Stanley Cups Since 67 rows 3-5"),
    ]
    small = _sections(_chunker("structure", max_tokens=20, overlap_tokens=0), book)
    assert [s.location.row_start for s in small if s.location][:3] == [3, 4, 5]


def test_text_file_paragraphs_and_windows_cite_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "NEWS.txt"
    path.write_text(
        "Release 2.1\n\nThe parser reads\nwrapped lines.\n\f\n- a fix\n- another fix\n",
        encoding="utf-8",
    )
    elements = parse_file(path).elements
    lines = [(e.text, e.location.line_start, e.location.line_end) for e in elements if e.location]
    assert lines == [
        ("Release 2.1", 1, 1),
        ("The parser reads wrapped lines.", 3, 4),
        ("a fix", 6, 6),
        ("another fix", 7, 7),
    ]  # fmt: skip
    document = _read(path, tmp_path)
    windows = _sections(_chunker("window", max_tokens=20, overlap_tokens=0), document)
    assert [_cite(document, s) for s in windows] == ["NEWS.txt:1-7"]


def test_documents_chunked_before_locations_were_kept_are_stale() -> None:
    """The chunkers' definitions carry the revision of their output, so documents they
    made before (no locations) get a new version and are written again."""
    for name in ("structure", "code", "window"):
        definition = _chunker(name).definition()
        assert definition["revision"] == REVISION and "spec" in definition


def test_a_chunk_stored_without_a_location_reads_as_none() -> None:
    """Knowledge bases written before locations were kept stay readable."""
    payload = {
        "document_id": "d", "chunk_id": "d#0", "source": "s", "version": "v",
        "uri": "/docs/guide.md", "content": "text",
    }  # fmt: skip
    result = MatchPayload.model_validate(payload).result(0.5)
    assert result.location is None and result.cite == "guide.md"
    stored = MatchPayload.model_validate({**payload, "location": {"line_start": 3, "line_end": 9}})
    assert stored.result(0.5).cite == "guide.md:3-9"
    assert stored.result(0.5).location == Location(line_start=3, line_end=9)


def _paged(*texts: tuple[int, str], slides: bool = False) -> Document:
    """A document of paragraphs, each on the page (or slide) given, under one title."""
    where = "slide" if slides else "page"
    elements = [Element(kind="title", text="Harbour Supplies")] + [
        Element(kind="paragraph", text=text, location=Location(**{where: number}))
        for number, text in texts
    ]
    return Document(id="d", uri="/docs/report.pdf", source="s", title="Harbour Supplies",
                    elements=elements)  # fmt: skip


OVERVIEW = "Harbour Supplies sells fasteners and hand tools to shipyards along the coast."
LETTER = "Dear Ms. Patel, our Tilburg warehouse will close for good on 14 March."
TABLE = "Product | Stock\nBolts | 1200"


@pytest.mark.parametrize("name", ["structure", "code"])
def test_short_pages_are_not_merged_into_one_chunk(name: str) -> None:
    """A letter on page 2 and a table on page 3 fit in one chunk with page 1; merged, the
    letter would be cited ``pp. 1-3``. Each page is a chunk of its own."""
    document = _paged((1, OVERVIEW), (2, LETTER), (3, TABLE))
    sections = _sections(_chunker(name), document)
    assert [(s.text, _cite(document, s)) for s in sections] == [
        (OVERVIEW, "report.pdf p. 1"),
        (LETTER, "report.pdf p. 2"),
        (TABLE, "report.pdf p. 3"),
    ]
    assert all(not s.parts for s in sections)


def test_slides_without_titles_are_not_merged_into_one_chunk() -> None:
    deck = _paged((1, OVERVIEW), (2, LETTER), (3, TABLE), slides=True)
    cites = [_cite(deck, s) for s in _sections(_chunker("structure"), deck)]
    assert cites == ["report.pdf slide 1", "report.pdf slide 2", "report.pdf slide 3"]


def test_a_paragraph_continued_over_a_page_break_is_one_chunk_citing_each_part() -> None:
    """The page break cut a paragraph in two: its chunk holds both pages' halves as one
    paragraph, and a sentence of it is located on the page it is on."""
    first = "Next year the cold store in Delfzijl opens for"
    rest = "frozen goods in the spring. The loading dock takes four lorries at a time."
    document = _paged((1, OVERVIEW + " " + first), (2, rest), (3, LETTER))
    sections = _sections(_chunker("structure"), document)
    assert [_cite(document, s) for s in sections] == ["report.pdf pp. 1-2", "report.pdf p. 3"]
    joined = sections[0]
    assert joined.text == f"{OVERVIEW} {first} {rest}"  # one paragraph, not two
    assert [p.location.page for p in joined.parts] == [1, 2]
    assert joined.locate("The loading dock takes four lorries at a time.") == Location(page=2)
    assert joined.locate("Harbour Supplies: The loading dock takes four lorries") == Location(
        page=2
    )  # after the section's label
    assert joined.locate(OVERVIEW) == Location(page=1)
    # the sentence the break cut runs over both pages, and the whole chunk is no narrower
    assert joined.locate("opens for frozen goods") is None
    assert joined.locate(joined.text) is None
    assert joined.locate("a question no page holds the words of") is None


def test_a_paragraph_is_not_continued_from_a_finished_sentence() -> None:
    document = _paged((1, OVERVIEW), (2, "frozen goods arrive in spring."))
    assert [_cite(document, s) for s in _sections(_chunker("structure"), document)] == [
        "report.pdf p. 1",
        "report.pdf p. 2",
    ]


def test_a_window_over_two_pages_locates_each_sentence() -> None:
    document = _paged((1, OVERVIEW), (2, LETTER))
    (window,) = _sections(_chunker("window"), document)
    assert _cite(document, window) == "report.pdf pp. 1-2"
    assert window.locate(LETTER) == Location(page=2)
    assert window.locate("Harbour Supplies sells fasteners") == Location(page=1)


# -- formats with no lines, pages or ids: cited by the section a chunk is in ----------
MAN_PAGE = """.TH DEMO 8 "2026" "demo 1.0"
.SH NAME
demo \\- check a demo file system
.SH DESCRIPTION
.B demo
checks the harbour ledger for torn records.
.SS Repair mode
In repair mode it rewrites each torn record from its journal copy.
.SH EXIT CODES
The exit status is 4 when torn records were left uncorrected.
"""


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_a_man_page_chunk_cites_its_section(tmp_path: Path) -> None:
    """``man`` names a place in a page by its section: so does a result (the page's file
    has no lines a reader could open at)."""
    (tmp_path / "demo.8").write_text(MAN_PAGE, encoding="utf-8")
    page = _read(tmp_path / "demo.8", tmp_path)
    found = [(s.text, _cite(page, s)) for s in _sections(_chunker("structure"), page)]
    assert found == [
        ("demo - check a demo file system", "demo(8) › NAME"),
        ("demo checks the harbour ledger for torn records.", "demo(8) › DESCRIPTION"),
        (
            "In repair mode it rewrites each torn record from its journal copy.",
            "demo(8) › DESCRIPTION › Repair mode",
        ),
        ("The exit status is 4 when torn records were left uncorrected.", "demo(8) › EXIT CODES"),
    ]


NO_IDS = """<html><head><title>Ledger guide</title></head><body>
<h1>Ledger guide</h1><p>The ledger keeps one line per mooring.</p>
<h2>Install</h2><p>Unpack the archive into /opt/ledger.</p>
<h3>On Linux</h3><p>Run the installer as root.</p>
<h2 id="use">Use</h2><p>Open the ledger with the harbour key.</p>
<h3>Tips</h3><p>Close the ledger before the tide report.</p>
</body></html>"""


def test_html_headings_without_ids_are_cited_by_their_text(tmp_path: Path) -> None:
    """A page without ids is no longer cited by its file alone; under a heading with an
    id, a deeper one without is named after the id."""
    (tmp_path / "guide.html").write_text(NO_IDS, encoding="utf-8")
    guide = _read(tmp_path / "guide.html", tmp_path)
    found = [_cite(guide, s) for s in _sections(_chunker("structure"), guide)]
    assert found == [
        "guide.html › Ledger guide",
        "guide.html › Install",
        "guide.html › Install › On Linux",
        "guide.html#use",
        "guide.html#use › Tips",
    ]


README = """Harbour ledger
==============

The ledger keeps one line per mooring.

Installing
----------
Unpack the archive into /opt/ledger.

A sentence that ends the section and is no heading at all, over a rule
---

Using it
--------

Open the ledger with the harbour key.
"""


def test_underlined_plain_text_lines_are_headings(tmp_path: Path) -> None:
    """``Title`` over ``=====`` and ``Sub`` over ``---`` in a plain-text README are its
    headings (a chunk's heading path); a short rule under a long sentence is not."""
    (tmp_path / "README").write_text(README, encoding="utf-8")
    readme = _read(tmp_path / "README", tmp_path)
    headings = [(e.text, e.level) for e in readme.elements if e.kind == "heading"]
    assert headings == [("Harbour ledger", 1), ("Installing", 2), ("Using it", 2)]
    found = [
        (s.heading_path[-1], _cite(readme, s)) for s in _sections(_chunker("structure"), readme)
    ]
    assert found == [
        ("Harbour ledger", "README:4"),
        ("Installing", "README:8-11"),
        ("Using it", "README:16"),
    ]
