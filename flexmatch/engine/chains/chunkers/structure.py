"""``structure``: split on the document's own headings, pack each section to a budget."""

from __future__ import annotations

from flexmatch.engine.chains.chunkers._budget import BudgetParams, pack
from flexmatch.engine.chains.kinds import Chunker
from flexmatch.engine.chains.registry import register
from flexmatch.models import Document, Element, Section


@register("chunker", "structure")
class StructureChunker(Chunker):
    """Split on the document's own headings; pack each section's blocks to a token budget."""

    Params = BudgetParams

    async def run(self, document: Document) -> list[Section]:
        budget = (self.params.max_tokens, self.params.overlap_tokens)
        sections: list[Section] = []
        headings: list[tuple[int, str]] = []
        body: list[Element] = []

        def flush() -> None:
            path = [text for _, text in headings]
            for chunk in pack([element.text for element in body], *budget):
                sections.append(Section(text=chunk, heading_path=path))
            body.clear()

        for element in document.elements:
            if element.kind in ("title", "heading"):
                flush()
                level = 0 if element.kind == "title" else max(1, element.level)
                while headings and headings[-1][0] >= level:
                    headings.pop()
                headings.append((level, element.text))
            else:
                body.append(element)
        flush()
        if not sections:  # a document of headings only: index the headings themselves
            texts = [element.text for element in document.elements]
            sections = [Section(text=chunk) for chunk in pack(texts, *budget)]
        return sections
