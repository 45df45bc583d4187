"""``structure``: split on the document's own headings, pack each section to a budget.

Every section says where it is (``Location.spanning`` of the elements it holds). A heading
with nothing under it before a heading of its level or above (``## Installing on Windows``
directly followed by ``## Installing on Linux``) is kept as a section of its own: dropped,
the words a reader searches for would not be in the index at all.

A table over the budget is cut between its rows, its header row repeated at the top of
every piece (``split_table``): a row read without its column names means little.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flexmatch.engine.chains.chunker._budget import (
    BudgetParams,
    line_locations,
    pack,
    pack_elements,
    split_lines,
    split_table,
    table_locations,
    with_revision,
)
from flexmatch.engine.chains.kinds import Chunker
from flexmatch.models import Document, Element, Section
from flexmatch.text import count_tokens


@dataclass
class _Heading:
    level: int
    element: Element
    used: bool = False  # something (text, or a deeper heading) came under it


class StructureChunker(Chunker):
    """Split on the document's own headings; pack each section's blocks to a token budget."""

    Params = BudgetParams

    def definition(self) -> dict[str, Any]:
        return with_revision(super().definition())

    async def run(self, document: Document) -> list[Section]:
        budget = (self.params.max_tokens, self.params.overlap_tokens)
        sections: list[Section] = []
        headings: list[_Heading] = []
        body: list[Element] = []

        def path() -> list[str]:
            return [h.element.text for h in headings]

        def add_packed(elements: list[Element]) -> None:
            for text, where, parts in pack_elements(elements, *budget):
                sections.append(
                    Section(text=text, heading_path=path(), location=where, parts=parts)
                )

        def flush() -> None:
            if body and headings:
                headings[-1].used = True
            run: list[Element] = []
            for element in body:
                if _long_code(element, budget[0]):  # lines kept: code read as sentences is lost
                    add_packed(run)
                    run = []
                    pieces = split_lines(element.text, budget[0])
                    for piece, where in zip(
                        pieces, line_locations(element.text, pieces, element.location), strict=True
                    ):
                        sections.append(Section(text=piece, heading_path=path(), location=where))
                elif _long_table(element, budget[0]):
                    add_packed(run)
                    run = []
                    cut = split_table(element.text, budget[0])
                    spans = [(first, last) for _, first, last in cut]
                    wheres = table_locations(element.text, spans, element.location)
                    for (piece, _, _), where in zip(cut, wheres, strict=True):
                        sections.append(Section(text=piece, heading_path=path(), location=where))
                else:
                    run.append(element)
            add_packed(run)
            body.clear()

        def pop() -> None:
            heading = headings.pop()
            if not heading.used:  # nothing under it: its own section, under its parents
                element = heading.element
                where = element.location
                sections.append(Section(text=element.text, heading_path=path(), location=where))

        for element in document.elements:
            if element.kind in ("title", "heading"):
                flush()
                level = 0 if element.kind == "title" else max(1, element.level)
                while headings and headings[-1].level >= level:
                    pop()
                if headings:
                    headings[-1].used = True
                headings.append(_Heading(level, element))
            else:
                body.append(element)
        flush()
        had_text = bool(sections) or any(h.used for h in headings)
        while headings and had_text:
            pop()
        if not had_text:  # a document of headings only: index the headings themselves
            texts = [element.text for element in document.elements]
            sections = [Section(text=chunk) for chunk in pack(texts, *budget)]
        return sections


def _long_code(element: Element, max_tokens: int) -> bool:
    return element.kind == "code" and count_tokens(element.text) > max_tokens


def _long_table(element: Element, max_tokens: int) -> bool:
    return element.kind == "table" and count_tokens(element.text) > max_tokens
