"""The PowerPoint (.pptx) parser against the sample decks."""

from __future__ import annotations

from flexmatch.models import Element, Location
from tests.inputs.parsing.samples import headings, of_kind, parse_doc


def test_pptx_slide_titles_bullets_and_pages() -> None:
    doc = parse_doc("fake-power-point.pptx")
    assert doc.elements[0] == Element(
        kind="heading", text="Adding a Bullet Slide", level=1, location=Location(slide=1)
    )
    items = [e.text for e in of_kind(doc, "list_item")]
    assert items == [  # paragraph levels become Markdown nesting
        "- Find the bullet slide layout",
        "  - Use _TextFrame.text for first bullet",
        "    - Use _TextFrame.add_paragraph() for subsequent bullets",
    ]
    assert "Here is some text in a text box!" in [e.text for e in of_kind(doc, "paragraph")]

    deck = parse_doc("sample-presentation.pptx")
    assert [h for h in headings(deck)][:2] == [
        (1, "Title Slide"),
        (1, "This is the first content slide"),
    ]
    assert {e.location.slide for e in deck.elements if e.location} == {1, 2, 3, 4}
    assert all(e.location and e.page is None for e in deck.elements)  # a slide, not a page
    assert any("1 | A1 | B1 | C1" in t.text for t in of_kind(deck, "table"))


def test_pptx_table() -> None:
    doc = parse_doc("fake-power-point-table.pptx")
    (table,) = of_kind(doc, "table")
    assert table.text.splitlines()[1] == "Red | Green | Blue"
    assert table.location == Location(slide=1)
