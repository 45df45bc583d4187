"""``llm_context``: an LLM reads the document and says how the section fits in it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.kinds import QualifyingTextChain
from flexmatch.engine.chains.output import parse_text
from flexmatch.engine.chains.registry import register
from flexmatch.engine.chains.variables import SECTION_VARIABLES, section_variables
from flexmatch.models import Document, Section


class ContextParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_document_chars: int = Field(12000, ge=500, le=400000)


@register("qualifying_text", "llm_context")
class LLMContext(QualifyingTextChain):
    """An LLM reads the (budget-truncated) document and says how the section fits in it."""

    Params = ContextParams
    uses_llm = True
    prompt_variables = SECTION_VARIABLES

    def prompt_text(self, section: Section, document: Document) -> str:
        variables = section_variables(section, document)
        variables["document"]["text"] = document.text[: self.params.max_document_chars]
        return self.render(**variables)

    async def run(self, section: Section, document: Document) -> str:
        raw = await self.complete(self.prompt_text(section, document))
        return parse_text(raw, self.spec.output)
