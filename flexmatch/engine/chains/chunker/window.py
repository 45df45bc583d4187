"""``window``: plain overlapping windows over the whole text, ignoring structure.

Each window's location spans the elements its words come from; a window over two pages
(slides, sheets) also says where each part of its text is, so a sentence of it is cited
by its own page."""

from __future__ import annotations

from typing import Any

from flexmatch.engine.chains.chunker._budget import BudgetParams, place, with_revision
from flexmatch.engine.chains.kinds import Chunker
from flexmatch.models import Document, Element, Location, Section, SectionPart
from flexmatch.text import word_windows


class WindowChunker(Chunker):
    """Plain overlapping windows over the whole text, ignoring structure."""

    Params = BudgetParams

    def definition(self) -> dict[str, Any]:
        return with_revision(super().definition())

    async def run(self, document: Document) -> list[Section]:
        words: list[str] = []
        owners: list[int] = []  # the element each word comes from
        for index, element in enumerate(document.elements):
            own = element.text.split()
            words.extend(own)
            owners.extend([index] * len(own))
        sections = []
        elements = document.elements
        for start, end in word_windows(words, self.params.max_tokens, self.params.overlap_tokens):
            held = range(owners[start], owners[end - 1] + 1)
            where = Location.spanning(elements[i].location for i in held)
            text = " ".join(words[start:end])
            parts: list[SectionPart] = []
            if len({place(elements[i].location) for i in held}) > 1:
                parts = _parts(words[start:end], owners[start:end], elements)
            sections.append(Section(text=text, location=where, parts=parts))
        return sections


def _parts(words: list[str], owners: list[int], elements: list[Element]) -> list[SectionPart]:
    """Where each run of a window's words (joined by single spaces) is: its element's
    location, so a sentence of a window over two pages is cited by its own."""
    parts: list[SectionPart] = []
    offset = 0
    for word, owner in zip(words, owners, strict=True):
        start, offset = offset, offset + len(word)
        location = elements[owner].location
        if location is not None and parts and parts[-1].location == location:
            parts[-1] = SectionPart(start=parts[-1].start, end=offset, location=location)
        elif location is not None:
            parts.append(SectionPart(start=start, end=offset, location=location))
        offset += 1  # the space after it
    return parts
