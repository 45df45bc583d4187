"""``rewrite``: an LLM rewrites the query as the question(s) it asks."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from flexmatch.engine.chains.kinds import QueryTransform
from flexmatch.engine.chains.output import parse_json, parse_list


class RewriteParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keep_original: bool = True


class Rewrite(QueryTransform):
    """An LLM rewrites the query as the question(s) it asks; the original is kept too."""

    Params = RewriteParams
    uses_llm = True
    prompt_variables = frozenset({"query", "params"})

    async def run(self, query: str) -> list[str]:
        raw = await self.complete(self.render(query=query))
        # a rewrite is searched: prose read line by line would be searched too, so an
        # answer that is not the JSON asked for counts as no rewrite
        structured = self.spec.output.format != "json" or parse_json(raw) is not None
        questions = parse_list(raw, self.spec.output) if structured else []
        if not questions:
            self.warn("the LLM's rewrite could not be parsed; searched with the query as typed")
        variants = ([query] if self.params.keep_original else []) + questions
        unique = list(dict.fromkeys(v for v in variants if v.strip()))
        return unique or [query]
