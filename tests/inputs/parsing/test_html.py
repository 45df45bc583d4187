"""The HTML parser: the sample pages, and ``parse_html_bytes`` for fetched bytes."""

from __future__ import annotations

import pytest

from flexmatch.errors import EmptyDocumentError
from flexmatch.inputs.parsing import parse_html_bytes
from tests.inputs.parsing.samples import headings, of_kind, parse_doc


def test_html_cp1252_is_decoded() -> None:
    doc = parse_doc("fake-html-cp1252.html")
    text = doc.text
    for word in ("schöne", "köstlich", "été", "niño", "señora", "João", "åt", "15,50 €"):
        assert word in text
    assert "\ufffd" not in text
    assert doc.title == "My First Heading"
    code = of_kind(doc, "code")
    assert len(code) == 1 and "\n" in code[0].text  # <pre> keeps its lines


def test_html_structure() -> None:
    doc = parse_doc("fake-html.html")
    assert headings(doc) == [
        (1, "My First Heading"),
        (2, "My Second Heading"),
        (3, "A Third Heading"),
    ]
    assert [e.text for e in of_kind(doc, "list_item")] == [
        "- A test list",
        "  - With sub-bullets!",
        "  - And another",
        "- Back at the root",
    ]  # Markdown markers, nesting kept
    (table,) = of_kind(doc, "table")
    assert table.text.splitlines() == [
        "Column 1 | Column 2",
        "Row 1, Cell 1 | Row 1, Cell 2",
        "Row 2, Cell 1 | Row 2, Cell 2",
    ]


def test_html_drops_header_and_footer() -> None:
    doc = parse_doc("fake-html-with-footer-and-header.html")
    assert "My first paragraph." in doc.text
    assert "Header" not in doc.text and "Footer" not in doc.text


def test_html_10k_tables_and_text() -> None:
    doc = parse_doc("example-10k-1p.html")
    assert any("Common stock | GLXZ | OTCQB marketplace" in t.text for t in of_kind(doc, "table"))
    assert "Commission file number: 000-30653" in doc.text
    assert doc.title == "example-10k-1p"  # empty <title>, no <h1>: falls back to the stem


def test_parse_html_bytes_uses_declared_charset() -> None:
    html = '<html><head><meta charset="iso-8859-1"><title>Caf\u00e9</title></head>'
    html += "<body><script>var x = 1;</script><div>Cr\u00e8me br\u00fbl\u00e9e \u20ac5</div>"
    html += "<ul><li>Item <b>one</b></li></ul></body></html>"
    doc = parse_html_bytes(html.encode("cp1252"), base_title="fallback")
    assert doc.title == "Café"
    assert [e.kind for e in doc.elements] == ["paragraph", "list_item"]
    assert doc.elements[0].text == "Crème brûlée €5"
    assert doc.elements[1].text == "- Item one"
    assert "var x" not in doc.text


def test_parse_html_bytes_title_fallback_and_empty() -> None:
    assert parse_html_bytes(b"<p>Just text</p>", base_title="Page").title == "Page"
    with pytest.raises(EmptyDocumentError, match="Page: no text found"):
        parse_html_bytes(b"<html><body><script>x()</script></body></html>", base_title="Page")
