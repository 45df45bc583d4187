"""Matching texts for code: the questions a piece of code answers, or its signatures.

``code-questions``: an LLM writes the questions a developer would ask that the code
answers (grouped and cached per chunk as ``questions`` does); the chunk's signatures
are indexed with them, and stand in for them when the answer for a chunk is unusable.
``code-signatures`` (no LLM): for each definition in the chunk, its name in words
(``parse_file`` → "parse file"), its signature and the first sentences of its
docstring or doc comment, read again from the chunk with the file's grammar.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.batching import ChunkRequest
from flexmatch.engine.chains.kinds import MatchingTextChain
from flexmatch.engine.chains.matching_text.questions import LLMQuestions, QuestionParams
from flexmatch.engine.chains.variables import content_text
from flexmatch.inputs.parsing.code import GRAMMARS, outline, symbol_name
from flexmatch.models import Document, MatchingText, Section
from flexmatch.text import split_sentences

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_BLANK_LINE = re.compile(r"\n\s*\n")


class SignatureParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_content: bool = True
    prefix_symbol: bool = True  # "parse_file: Parse one file, …"
    doc_sentences: int = Field(3, ge=0, le=20)  # per definition
    min_words: int = Field(3, ge=1)
    max_items: int = Field(40, ge=1)


def name_words(*names: str) -> str:
    """Identifiers as words: ``KnowledgeBase.ingest_file`` → "knowledge base ingest file"."""
    return " ".join(word.lower() for name in names for word in _WORD.findall(name))


def doc_sentences(doc: str, limit: int, min_words: int) -> list[str]:
    """The first sentences of a docstring, its hard-wrapped lines joined again."""
    sentences: list[str] = []
    for paragraph in _BLANK_LINE.split(doc):
        for sentence in split_sentences(" ".join(paragraph.split())):
            if len(sentence.split()) >= min_words:
                sentences.append(sentence)
            if len(sentences) >= limit:
                return sentences
    return sentences


def signature_texts(
    section: Section, document: Document, params: SignatureParams
) -> list[MatchingText]:
    """Names, signatures and docstring sentences of the definitions in ``section``; for a
    piece with none (code between definitions, a part of a long one), the symbols above it."""
    texts: list[MatchingText] = []
    seen: set[str] = set()

    def add(text: str, kind: Any) -> None:
        if text and text not in seen and len(texts) < params.max_items:
            seen.add(text)
            texts.append(MatchingText(text=text, kind=kind))

    def add_doc(owner: str, doc: str) -> None:
        for sentence in doc_sentences(doc, params.doc_sentences, params.min_words):
            add(f"{owner}: {sentence}" if params.prefix_symbol and owner else sentence, "sentence")

    language = document.metadata.get("language")
    if not isinstance(language, str) or language not in GRAMMARS:
        return texts
    found = outline(section.text, language)
    labels = section.heading_path[1:]  # the symbols the chunk sits in (after its file)
    names = ", ".join(d.name for d in found.definitions)
    if found.definitions and labels and labels[-1] in (found.definitions[0].label, names):
        labels = labels[:-1]  # … the last one being the chunk's own definition(s)
    around = [symbol_name(label, language) for label in labels]
    if found.doc:
        add_doc(section.heading_path[0] if section.heading_path else document.title, found.doc)
    definitions = list(found.walk())
    for parents, definition in definitions:
        add(name_words(*around, *parents, definition.name), "keyword")
        if definition.signature not in (definition.label, definition.name):
            add(definition.signature, "sentence")
        add_doc(definition.name, definition.doc)
    if not definitions and around:
        add(name_words(*around), "keyword")
    return texts


class CodeSignatures(MatchingTextChain):
    """No LLM: each definition's name in words, signature and docstring sentences."""

    Params = SignatureParams

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        texts = signature_texts(section, document, self.params)
        if self.params.include_content or not texts:
            texts.append(content_text(section, document))
        return texts


class CodeQuestionParams(QuestionParams):
    include_signatures: bool = True  # index the offline texts too (always when no questions)


class LLMCodeQuestions(LLMQuestions):
    """An LLM writes the questions the code answers; its signatures are indexed too."""

    Params = CodeQuestionParams

    def item_inputs(self, request: ChunkRequest) -> Any:
        return [*super().item_inputs(request), request.document.metadata.get("language")]

    def group_prompt(self, requests: list[ChunkRequest]) -> str:
        if not self.grouped:
            return super().group_prompt(requests)
        chunks = [
            {
                "id": number,
                "title": r.document.title,
                "source": r.document.source,
                "language": str(r.document.metadata.get("language") or ""),
                "heading_path": r.section.heading_path,
                "text": r.section.text,
            }
            for number, r in enumerate(requests, start=1)
        ]
        return self.render(chunks=chunks)

    def offline_texts(self, section: Section, document: Document) -> list[MatchingText]:
        """The signatures, not the sentences: a chunk of code is not prose to split."""
        if not self.params.include_signatures:
            return []
        return signature_texts(section, document, SignatureParams())
