"""List markers and nesting are kept (``- ``, ``1. ``, indentation) so a chunk reads as a
Markdown list: HTML, Word, PowerPoint and OpenDocument, on real files where there are some."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from flexmatch.chains import ChainContext, Chunker, build_chain
from flexmatch.config import ChainRef
from flexmatch.inputs.parsing import parse_file, parse_html_bytes
from flexmatch.inputs.parsing._common import ListMarkers
from flexmatch.models import Document
from tests.inputs.parsing.samples import of_kind, parse_doc

POLICY = Path("/usr/share/doc/python3/python-policy.html")  # Sphinx output of a real manual


def test_markers_count_per_list_and_indent_under_the_parent_text() -> None:
    markers = ListMarkers()
    assert [markers.prefix(*args) for args in [(2, True), (2, True), (3, False)]] == [
        "1. ",
        "2. ",
        "   - ",  # under "2. ": three columns in
    ]
    assert markers.prefix(4, True) == "     1. "
    assert markers.prefix(2, True) == "3. "  # back out: the outer list counts on
    markers.reset()
    assert markers.prefix(0, True, number=5) == "5. "


def test_sample_presentation_chunk_reads_as_a_markdown_list() -> None:

    parsed = parse_doc("sample-presentation.pptx")
    document = Document(
        id="d", uri="deck.pptx", source="s", title=parsed.title, elements=parsed.elements
    )
    chunker = build_chain(ChainRef(chain="structure", params={}), Chunker, ChainContext())
    sections = asyncio.run(chunker.run(document))
    first = next(s for s in sections if s.heading_path[-1] == "This is the first content slide")
    assert first.text == "\n\n".join(
        [
            "There’s text here",
            "- And a list of bulleted information",
            "  - With a sub-bullet",
            "  - And another one",
            "    - This one is a sub-sub-bullet",
            "- We can see how it works",
        ]
    )


def test_html_ordered_lists_number_their_items_and_nest() -> None:
    html = (
        b"<ol start='3'><li>three<ul><li>sub</li></ul></li><li>four</li></ol>"
        b"<ol><li value='9'>nine</li><li>ten</li></ol>"
    )
    doc = parse_html_bytes(html, "page")
    assert [e.text for e in doc.elements] == [
        "3. three",
        "   - sub",
        "4. four",
        "9. nine",
        "10. ten",
    ]


@pytest.mark.skipif(not POLICY.is_file(), reason="needs the python3 package's docs")
def test_real_sphinx_page_keeps_numbered_lists() -> None:
    items = [e.text for e in of_kind(parse_file(POLICY), "list_item")]
    assert any(i.startswith("1. Applications should use Python 3") for i in items)
    assert any(i.startswith("2. Python libraries need to support Python 3") for i in items)
    assert "- Neil Schemenauer <nas@debian.org>" in items


def test_odt_lists_take_bullets_or_numbers_from_their_style(tmp_path: Path) -> None:
    from odf.opendocument import OpenDocumentText
    from odf.text import H, List, ListItem, ListLevelStyleBullet, ListLevelStyleNumber, ListStyle, P

    document = OpenDocumentText()
    style = ListStyle(name="Steps")
    style.addElement(ListLevelStyleNumber(level=1, numformat="1"))
    style.addElement(ListLevelStyleBullet(level=2, bulletchar="•"))
    document.automaticstyles.addElement(style)
    document.text.addElement(H(outlinelevel=1, text="Baking"))
    steps = List(stylename="Steps")
    for word in ("mix", "bake"):
        item = ListItem()
        item.addElement(P(text=word))
        if word == "mix":
            inner, sub = List(), ListItem()
            sub.addElement(P(text="flour"))
            inner.addElement(sub)
            item.addElement(inner)
        steps.addElement(item)
    document.text.addElement(steps)
    document.save(str(tmp_path / "steps.odt"))
    items = [e.text for e in of_kind(parse_file(tmp_path / "steps.odt"), "list_item")]
    assert items == ["1. mix", "   - flour", "2. bake"]
