"""``context``: an LLM says how each chunk fits in its document (contextual retrieval).

The LLM sees each document's title, outline (its headings, in order) and opening, then the
chunk with its heading path: what the chunk is part of and which sections surround it,
without the rest of the document's text. So a chunk's answer depends on its own text and
on its document's structure and beginning only: an edit to one section re-asks that
section's chunks alone (each chunk's answer is cached on exactly these inputs), where a
prompt quoting the whole document made every edit re-ask every chunk. A change to the
outline or the opening re-asks them all, as it changes what each chunk is part of.

Chunks are asked about in groups (``chunks_per_call``; a group holds each of its
documents once, document first and its chunks after it, so a provider's prompt cache
serves the repeated document); a prompt written for one chunk at a time (it uses
``chunk`` but not ``documents``) still works, one call per chunk.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.batching import ChunkBatching, ChunkRequest, answers_by_chunk
from flexmatch.engine.chains.kinds import QualifyingTextChain
from flexmatch.engine.chains.output import parse_text
from flexmatch.engine.chains.variables import document_outline, document_text, section_variables
from flexmatch.models import Document, Section

VARIABLES = frozenset({"documents", "chunk", "document", "source", "params"})


class ContextParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # how much of the document's beginning the prompt quotes (its ``text``)
    max_document_chars: int = Field(2000, ge=500, le=400000)
    # how much of its outline (headings, one a line) the prompt quotes
    max_outline_chars: int = Field(4000, ge=0, le=100000)
    chunks_per_call: int = Field(8, ge=1, le=32)


class LLMContext(ChunkBatching[str], QualifyingTextChain):
    """An LLM reads the document's title, outline and opening and says how the chunk fits."""

    Params = ContextParams
    uses_llm = True
    prompt_variables = VARIABLES

    group_variable = "documents"

    def _opening(self, document: Document) -> str:
        return document_text(document)[: self.params.max_document_chars]

    def _outline(self, document: Document) -> str:
        outline = document_outline(document)
        limit = self.params.max_outline_chars
        if len(outline) <= limit:
            return outline
        return outline[: outline.rfind("\n", 0, limit) + 1 or limit].rstrip() + "\n…"

    def _document(self, document: Document) -> dict[str, Any]:
        return {
            "title": document.title,
            "uri": document.uri,
            "outline": self._outline(document),
            "text": self._opening(document),
        }

    def item_inputs(self, request: ChunkRequest) -> Any:
        document, section = request.document, request.section
        about = self._document(document)
        return [
            about["title"],
            about["uri"],
            about["outline"],
            about["text"],
            section.heading_path,
            section.text,
        ]

    def group_prompt(self, requests: list[ChunkRequest]) -> str:
        if not self.grouped:
            one = requests[0]
            variables = section_variables(one.section, one.document)
            variables["document"].update(self._document(one.document))
            return self.render(**variables)
        documents: dict[int, dict[str, Any]] = {}
        for number, request in enumerate(requests, start=1):
            document = request.document
            entry = documents.setdefault(id(document), self._document(document))
            entry.setdefault("chunks", []).append(
                {
                    "id": number,
                    "heading_path": request.section.heading_path,
                    "text": request.section.text,
                }
            )
        return self.render(documents=list(documents.values()))

    def parse_group(self, raw: str, count: int) -> list[str | None]:
        rules = self.spec.output
        if not self.grouped:
            return [parse_text(raw, rules) or None]
        return [
            (parse_text(context, rules) or None) if isinstance(context, str) else None
            for context in answers_by_chunk(raw, count, "context")
        ]

    async def run(self, section: Section, document: Document) -> str:
        return await self.answer(section, document) or ""
