"""``structure``: split on the document's own headings, pack each section to a budget."""

from __future__ import annotations

from flexmatch.engine.chains.chunkers._budget import BudgetParams, pack, split_lines
from flexmatch.engine.chains.kinds import Chunker
from flexmatch.engine.chains.registry import register
from flexmatch.models import Document, Element, Section
from flexmatch.text import count_tokens


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
            texts: list[str] = []
            for element in body:
                if _long_code(element, budget[0]):  # lines kept: code read as sentences is lost
                    pieces = [*pack(texts, *budget), *split_lines(element.text, budget[0])]
                    sections.extend(Section(text=piece, heading_path=path) for piece in pieces)
                    texts = []
                else:
                    texts.append(element.text)
            sections.extend(Section(text=c, heading_path=path) for c in pack(texts, *budget))
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


def _long_code(element: Element, max_tokens: int) -> bool:
    return element.kind == "code" and count_tokens(element.text) > max_tokens
