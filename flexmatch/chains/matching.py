"""Matching-text chains: section → the short texts that get embedded and matched."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.chains.base import Chain, register
from flexmatch.chains.output import parse_list
from flexmatch.chains.variables import SECTION_VARIABLES, heading_label, section_variables
from flexmatch.models import Document, MatchingText, Section
from flexmatch.text import split_sentences


class MatchingTextChain(Chain):
    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        raise NotImplementedError


def content_text(section: Section, document: Document) -> MatchingText:
    """The chunk itself as a matching text, prefixed with where it sits."""
    label = heading_label(document, section)
    return MatchingText(text=f"{label}\n{section.text}" if label else section.text, kind="content")


class QuestionParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(5, ge=1, le=30)
    include_content: bool = True


@register("matching_text", "llm_questions")
class LLMQuestions(MatchingTextChain):
    """An LLM writes the questions the section answers ("Jeopardy style")."""

    Params = QuestionParams
    uses_llm = True
    prompt_variables = SECTION_VARIABLES

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        raw = await self.complete(self.render(**section_variables(section, document)))
        rules = self.spec.output.model_copy(
            update={"max_items": min(self.spec.output.max_items, self.params.count)}
        )
        texts = [MatchingText(text=q, kind="question") for q in parse_list(raw, rules)]
        if self.params.include_content or not texts:
            texts.append(content_text(section, document))
        return texts


class SentenceParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prefix_heading: bool = True
    include_content: bool = True
    min_words: int = Field(4, ge=1)
    max_items: int = Field(40, ge=1)


@register("matching_text", "sentences")
class Sentences(MatchingTextChain):
    """No LLM: each sentence of the section, prefixed with the title and heading path."""

    Params = SentenceParams

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        label = heading_label(document, section) if self.params.prefix_heading else ""
        texts: list[MatchingText] = []
        for sentence in split_sentences(section.text):
            if len(sentence.split()) < self.params.min_words:
                continue
            text = f"{label}: {sentence}" if label else sentence
            texts.append(MatchingText(text=text, kind="sentence"))
            if len(texts) >= self.params.max_items:
                break
        if self.params.include_content or not texts:
            texts.append(content_text(section, document))
        return texts


@register("matching_text", "content")
class Content(MatchingTextChain):
    """No LLM: the section text alone (the classic chunk-embedding baseline)."""

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        return [content_text(section, document)]
