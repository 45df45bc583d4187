"""Qualifying-text chains: section + whole document → how the section fits its document."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.chains.base import Chain, register
from flexmatch.chains.output import parse_text
from flexmatch.chains.variables import SECTION_VARIABLES, heading_label, section_variables
from flexmatch.models import Document, Section
from flexmatch.text import lead_sentence


class QualifyingTextChain(Chain):
    async def run(self, section: Section, document: Document) -> str:
        raise NotImplementedError


class ContextParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_document_chars: int = Field(12000, ge=500, le=400000)


@register("qualifying_text", "llm_context")
class LLMContext(QualifyingTextChain):
    """An LLM reads the (budget-truncated) document and says how the section fits in it."""

    Params = ContextParams
    uses_llm = True
    prompt_variables = SECTION_VARIABLES

    async def run(self, section: Section, document: Document) -> str:
        variables = section_variables(section, document)
        variables["document"]["text"] = document.text[: self.params.max_document_chars]
        raw = await self.complete(self.render(**variables))
        return parse_text(raw, self.spec.output)


@register("qualifying_text", "headings")
class Headings(QualifyingTextChain):
    """No LLM: the document title, the section's heading path and the document's lead."""

    async def run(self, section: Section, document: Document) -> str:
        label = heading_label(document, section)
        lead = lead_sentence(document.text)
        parts = [f"From {label}." if label else ""]
        if lead and lead not in section.text[: len(lead) + 5]:
            parts.append(f"The document begins: {lead}")
        return " ".join(part for part in parts if part)
