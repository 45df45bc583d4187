"""``window``: plain overlapping windows over the whole text, ignoring structure."""

from __future__ import annotations

from flexmatch.engine.chains.chunkers._budget import BudgetParams
from flexmatch.engine.chains.kinds import Chunker
from flexmatch.engine.chains.registry import register
from flexmatch.models import Document, Section
from flexmatch.text import split_words


@register("chunker", "window")
class WindowChunker(Chunker):
    """Plain overlapping windows over the whole text, ignoring structure."""

    Params = BudgetParams

    async def run(self, document: Document) -> list[Section]:
        windows = split_words(document.text, self.params.max_tokens, self.params.overlap_tokens)
        return [Section(text=window) for window in windows]
