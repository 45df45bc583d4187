"""``content``: no LLM; the section text alone (the classic chunk-embedding baseline)."""

from __future__ import annotations

from flexmatch.engine.chains.kinds import MatchingTextChain
from flexmatch.engine.chains.variables import content_text
from flexmatch.models import Document, MatchingText, Section


class Content(MatchingTextChain):
    """No LLM: the section text alone (the classic chunk-embedding baseline)."""

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        return [content_text(section, document)]
