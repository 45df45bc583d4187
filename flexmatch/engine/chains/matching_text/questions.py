"""``questions``: an LLM writes the questions a section answers ("Jeopardy style").

The questions are indexed beside the section's sentences (the ``sentences`` chain's
texts) and the chunk text (``beside_sentences``, ``include_content``): measured on SQuAD
dev (bench/oracle_questions.py), questions instead of the sentences rank worse than the
offline default, even human-written ones; beside them they rank better.

Chunks are asked about in groups (``chunks_per_call``, from every document being indexed
at the moment), one call per group; a prompt written for one chunk at a time (it uses
``chunk`` but not ``chunks``) still works, one call per chunk.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.batching import ChunkBatching, ChunkRequest, answers_by_chunk
from flexmatch.engine.chains.kinds import MatchingTextChain
from flexmatch.engine.chains.matching_text.sentences import SentenceParams, sentence_texts
from flexmatch.engine.chains.output import clean_items, parse_list
from flexmatch.engine.chains.variables import content_text, section_variables
from flexmatch.models import Document, MatchingText, Section

VARIABLES = frozenset({"chunks", "chunk", "document", "source", "params"})


class QuestionParams(BaseModel):
    """What every questions chain (prose and code) takes."""

    model_config = ConfigDict(extra="forbid")

    count: int = Field(5, ge=1, le=30)
    include_content: bool = True
    chunks_per_call: int = Field(4, ge=1, le=32)


class TextQuestionParams(QuestionParams):
    beside_sentences: bool = True  # index the section's sentences beside the questions


class LLMQuestions(ChunkBatching[list[str]], MatchingTextChain):
    """An LLM writes the questions the section answers; its sentences and the chunk
    text are indexed too."""

    Params: ClassVar[type[QuestionParams]] = TextQuestionParams
    uses_llm = True
    prompt_variables = VARIABLES
    index_params = frozenset({"beside_sentences"})

    def item_inputs(self, request: ChunkRequest) -> Any:
        document, section = request.document, request.section
        return [document.title, document.source, section.heading_path, section.text]

    def group_prompt(self, requests: list[ChunkRequest]) -> str:
        if not self.grouped:
            one = requests[0]
            return self.render(**section_variables(one.section, one.document))
        chunks = [
            {
                "id": number,
                "title": r.document.title,
                "source": r.document.source,
                "heading_path": r.section.heading_path,
                "text": r.section.text,
            }
            for number, r in enumerate(requests, start=1)
        ]
        return self.render(chunks=chunks)

    def _rules(self) -> Any:
        rules = self.spec.output
        return rules.model_copy(update={"max_items": min(rules.max_items, self.params.count)})

    def parse_group(self, raw: str, count: int) -> list[list[str] | None]:
        if not self.grouped:
            return [parse_list(raw, self._rules()) or None]
        return [
            (clean_items(questions, self._rules()) or None) if isinstance(questions, list) else None
            for questions in answers_by_chunk(raw, count, "questions")
        ]

    def offline_texts(self, section: Section, document: Document) -> list[MatchingText]:
        """The texts indexed beside the questions that need no LLM (the chunk text aside)."""
        if not self.params.beside_sentences:
            return []
        return sentence_texts(section, document, SentenceParams())

    def known_texts(self, section: Section, document: Document) -> list[MatchingText]:
        texts = self.offline_texts(section, document)
        if self.params.include_content:
            texts.append(content_text(section, document))
        return texts

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        questions = await self.answer(section, document) or []
        texts = [MatchingText(text=q, kind="question") for q in questions]
        texts.extend(self.offline_texts(section, document))
        if self.params.include_content or not texts:
            texts.append(content_text(section, document))
        return texts
