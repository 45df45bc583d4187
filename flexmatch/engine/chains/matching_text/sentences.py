"""``sentences``: no LLM; each sentence of the section, prefixed with where it sits."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.kinds import MatchingTextChain
from flexmatch.engine.chains.variables import content_text, heading_label, module_mentions
from flexmatch.models import Document, MatchingText, Section
from flexmatch.text import split_sentences


class SentenceParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prefix_heading: bool = True
    include_content: bool = True
    min_words: int = Field(4, ge=1)
    max_items: int = Field(40, ge=1)


def sentence_texts(
    section: Section, document: Document, params: SentenceParams
) -> list[MatchingText]:
    """Each sentence of ``section`` long enough to match on, prefixed with where it sits,
    then what a code file's header says of the definition it holds (``module_mentions``):
    the ``sentences`` chain's texts, also indexed beside an LLM's questions."""
    label = heading_label(document, section) if params.prefix_heading else ""
    texts: list[MatchingText] = []
    sentences = [*split_sentences(section.text), *module_mentions(document, section)]
    for sentence in sentences:
        if len(sentence.split()) < params.min_words:
            continue
        text = f"{label}: {sentence}" if label else sentence
        texts.append(MatchingText(text=text, kind="sentence"))
        if len(texts) >= params.max_items:
            break
    return texts


class Sentences(MatchingTextChain):
    """No LLM: each sentence of the section, prefixed with the title and heading path."""

    Params = SentenceParams

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        texts = sentence_texts(section, document, self.params)
        if self.params.include_content or not texts:
            texts.append(content_text(section, document))
        return texts
