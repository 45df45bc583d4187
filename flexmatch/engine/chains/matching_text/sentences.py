"""``sentences`` and its variants: no LLM; the section's sentences, each text prefixed
with where it sits, and the chunk text.

Embedding is nearly all of an offline ingest, and it grows with the texts (one model run
each) and their tokens. ``sentences`` embeds every sentence alone; ``packed-sentences``
joins short lines (options, list items) until a text holds ``min_text_words`` words;
``sentence-windows`` takes ``window`` sentences a text. What each costs and keeps is
measured in docs/retrieval.md (bench/matching_cost.py, squad-dev, bench/real_folder.py).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

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
    window: int = Field(1, ge=1, le=20)  # sentences a text holds
    stride: int | None = Field(None, ge=1)  # sentences from one text to the next; None: window
    min_chunk_words: int = Field(0, ge=0)  # a shorter chunk is matched by its own text alone
    min_text_words: int = Field(0, ge=0)  # short sentences join the next until a text has this

    @model_validator(mode="after")
    def _stride_within_window(self) -> SentenceParams:
        if self.stride is not None and self.stride > self.window:
            raise ValueError(f"stride ({self.stride}) must not exceed window ({self.window})")
        return self


def _windows(sentences: list[str], window: int, stride: int) -> list[str]:
    """Runs of ``window`` consecutive sentences, ``stride`` apart; the last run ends at
    the last sentence (so none is left out)."""
    if window == 1:
        return sentences
    starts = list(range(0, max(len(sentences) - window, 0) + 1, stride))
    if starts[-1] + window < len(sentences):
        starts.append(len(sentences) - window)
    return [" ".join(sentences[start : start + window]) for start in starts]


def _packed(sentences: list[str], min_words: int) -> list[str]:
    """Consecutive sentences joined until each text holds ``min_words`` words: a prose
    sentence stays alone, a run of short lines (options, list items) becomes one text."""
    packed: list[str] = []
    current: list[str] = []
    words = 0
    for sentence in sentences:
        current.append(sentence)
        words += len(sentence.split())
        if words >= min_words:
            packed.append(" ".join(current))
            current, words = [], 0
    if current:
        packed.append(" ".join(current))
    return packed


def sentence_texts(
    section: Section, document: Document, params: SentenceParams
) -> list[MatchingText]:
    """The sentences of ``section`` (``window`` at a time) long enough to match on,
    prefixed with where they sit, then what a code file's header says of the definition
    it holds (``module_mentions``): the ``sentences`` chain's texts, also indexed beside
    an LLM's questions."""
    if params.min_chunk_words and len(section.text.split()) < params.min_chunk_words:
        return []
    label = heading_label(document, section) if params.prefix_heading else ""
    texts: list[MatchingText] = []
    sentences = [s for s in split_sentences(section.text) if s.strip()]
    if params.min_text_words:
        sentences = _packed(sentences, params.min_text_words)
    if params.window > 1:  # short lines join their neighbours instead of being dropped
        sentences = _windows(sentences, params.window, params.stride or params.window)
    for sentence in [*sentences, *module_mentions(document, section)]:
        if len(sentence.split()) < params.min_words:
            continue
        text = f"{label}: {sentence}" if label else sentence
        texts.append(MatchingText(text=text, kind="sentence"))
        if len(texts) >= params.max_items:
            break
    return texts


class Sentences(MatchingTextChain):
    """No LLM: the sentences of the section (``window`` at a time), prefixed with the
    title and heading path."""

    Params = SentenceParams

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        texts = sentence_texts(section, document, self.params)
        if self.params.include_content or not texts:
            texts.append(content_text(section, document))
        return texts


class WindowParams(SentenceParams):
    window: int = Field(3, ge=1, le=20)


class SentenceWindows(Sentences):
    """No LLM, the offline default: the sentences of the section three at a time."""

    Params = WindowParams


class PackedParams(SentenceParams):
    min_text_words: int = Field(12, ge=0)


class PackedSentences(Sentences):
    """No LLM: each sentence of the section, short ones (a man page's options, a list's
    items, a changelog's lines) joined until a text holds ``min_text_words`` words."""

    Params = PackedParams
