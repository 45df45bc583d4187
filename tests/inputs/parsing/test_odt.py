"""The OpenDocument text (.odt) parser against the sample document."""

from __future__ import annotations

from flexmatch.models import Element
from tests.inputs.parsing.samples import of_kind, parse_doc


def test_odt_paragraph_and_table() -> None:
    doc = parse_doc("fake.odt")
    assert doc.elements[0] == Element(kind="paragraph", text="Lorem ipsum dolor sit amet.")
    (table,) = of_kind(doc, "table")
    assert "Color | Blue | Red | Green" in table.text.splitlines()
