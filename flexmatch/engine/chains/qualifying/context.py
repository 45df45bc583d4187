"""``llm_context``: an LLM reads the document and says how each section fits in it.

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
from flexmatch.engine.chains.registry import register
from flexmatch.engine.chains.variables import document_text, section_variables
from flexmatch.models import Document, Section

VARIABLES = frozenset({"documents", "chunk", "document", "source", "params"})


class ContextParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_document_chars: int = Field(12000, ge=500, le=400000)
    chunks_per_call: int = Field(8, ge=1, le=32)


@register("qualifying_text", "llm_context")
class LLMContext(ChunkBatching[str], QualifyingTextChain):
    """An LLM reads the (budget-truncated) document and says how the section fits in it."""

    Params = ContextParams
    uses_llm = True
    prompt_variables = VARIABLES

    group_variable = "documents"

    def _text(self, document: Document) -> str:
        return document_text(document)[: self.params.max_document_chars]

    def item_inputs(self, request: ChunkRequest) -> Any:
        document, section = request.document, request.section
        return [
            document.title,
            document.uri,
            self._text(document),
            section.heading_path,
            section.text,
        ]

    def group_prompt(self, requests: list[ChunkRequest]) -> str:
        if not self.grouped:
            one = requests[0]
            variables = section_variables(one.section, one.document)
            variables["document"]["text"] = self._text(one.document)
            return self.render(**variables)
        documents: dict[int, dict[str, Any]] = {}
        for number, request in enumerate(requests, start=1):
            document = request.document
            entry = documents.setdefault(
                id(document),
                {"title": document.title, "uri": document.uri, "text": self._text(document)},
            )
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
