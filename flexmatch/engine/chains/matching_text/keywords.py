"""``keywords`` and ``keyphrases``: a source indexed by the search keywords a chunk is
found by, not the questions it answers (a catalogue, logs, code-ish text). Searched with
the ``keywords`` query transform, which puts a query in the same form."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.batching import answers_by_chunk
from flexmatch.engine.chains.keyphrases import keyphrases
from flexmatch.engine.chains.kinds import MatchingTextChain
from flexmatch.engine.chains.matching_text.questions import LLMQuestions
from flexmatch.engine.chains.output import clean_items, parse_list
from flexmatch.engine.chains.variables import content_text
from flexmatch.models import Document, MatchingText, Section


class LLMKeywords(LLMQuestions):
    """An LLM writes the keyword phrases a user would search to find the chunk; grouped,
    cached and failure-isolated per chunk exactly like ``questions``."""

    def parse_group(self, raw: str, count: int) -> list[list[str] | None]:
        if not self.grouped:
            return [parse_list(raw, self._rules()) or None]
        return [
            (clean_items(found, self._rules()) or None) if isinstance(found, list) else None
            for found in answers_by_chunk(raw, count, "keywords")
        ]

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        found = await self.answer(section, document) or []
        texts = [MatchingText(text=k, kind="keyword") for k in found]
        if self.params.include_content or not texts:
            texts.append(content_text(section, document))
        return texts


class KeyphraseParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(8, ge=1, le=50)
    max_words: int = Field(3, ge=1, le=6)
    include_content: bool = True


class Keyphrases(MatchingTextChain):
    """No LLM: the chunk's key phrases (YAKE), each one a matching text."""

    Params = KeyphraseParams

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        p = self.params
        found = keyphrases(section.text, p.count, p.max_words)
        texts = [MatchingText(text=k, kind="keyword") for k in found]
        if p.include_content or not texts:
            texts.append(content_text(section, document))
        return texts
