"""``window``: plain overlapping windows over the whole text, ignoring structure.

Each window's location spans the elements its words come from."""

from __future__ import annotations

from typing import Any

from flexmatch.engine.chains.chunker._budget import BudgetParams, with_revision
from flexmatch.engine.chains.kinds import Chunker
from flexmatch.models import Document, Location, Section
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
        for start, end in word_windows(words, self.params.max_tokens, self.params.overlap_tokens):
            held = range(owners[start], owners[end - 1] + 1)
            where = Location.spanning(document.elements[i].location for i in held)
            sections.append(Section(text=" ".join(words[start:end]), location=where))
        return sections
