"""``llm_questions``: an LLM writes the questions a section answers ("Jeopardy style")."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.kinds import MatchingTextChain
from flexmatch.engine.chains.output import parse_list
from flexmatch.engine.chains.registry import register
from flexmatch.engine.chains.variables import SECTION_VARIABLES, content_text, section_variables
from flexmatch.models import Document, MatchingText, Section


class QuestionParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(5, ge=1, le=30)
    include_content: bool = True


@register("matching_text", "llm_questions")
class LLMQuestions(MatchingTextChain):
    """An LLM writes the questions the section answers; the chunk text is indexed too."""

    Params = QuestionParams
    uses_llm = True
    prompt_variables = SECTION_VARIABLES

    def prompt_text(self, section: Section, document: Document) -> str:
        return self.render(**section_variables(section, document))

    async def run(self, section: Section, document: Document) -> list[MatchingText]:
        raw = await self.complete(self.prompt_text(section, document))
        rules = self.spec.output.model_copy(
            update={"max_items": min(self.spec.output.max_items, self.params.count)}
        )
        texts = [MatchingText(text=q, kind="question") for q in parse_list(raw, rules)]
        if self.params.include_content or not texts:
            texts.append(content_text(section, document))
        return texts
