"""``keywords`` and ``keyphrases``: a query put in the form of a keywords source's
matching texts (key phrases), so it is compared like with like."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.keyphrases import keyphrases
from flexmatch.engine.chains.kinds import QueryTransform
from flexmatch.engine.chains.output import parse_json, parse_list


class KeywordQueryParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keep_original: bool = True
    count: int = Field(5, ge=1, le=20)
    max_words: int = Field(3, ge=1, le=6)


def _variants(query: str, phrases: list[str], keep_original: bool) -> list[str]:
    """The query (when kept) and its key phrases as one search text: a keywords source
    indexes each phrase, and one text of all of them matches the chunk that has most."""
    variants = ([query] if keep_original else []) + ([", ".join(phrases)] if phrases else [])
    unique = list(dict.fromkeys(v for v in variants if v.strip()))
    return unique or [query]


class LLMKeywordQuery(QueryTransform):
    """An LLM writes the key phrases a query searches for."""

    Params = KeywordQueryParams
    uses_llm = True
    prompt_variables = frozenset({"query", "params"})

    async def run(self, query: str) -> list[str]:
        raw = await self.complete(self.render(query=query))
        structured = self.spec.output.format != "json" or parse_json(raw) is not None
        phrases = parse_list(raw, self.spec.output) if structured else []
        if not phrases:
            self.warn("the LLM's keywords could not be parsed; searched with the query as typed")
        return _variants(query, phrases[: self.params.count], self.params.keep_original)


class KeyphraseQuery(QueryTransform):
    """No LLM: the query's key phrases (YAKE), the same extraction the ``keyphrases``
    matching-text chain applies to chunks."""

    Params = KeywordQueryParams

    async def run(self, query: str) -> list[str]:
        p = self.params
        return _variants(query, keyphrases(query, p.count, p.max_words), p.keep_original)
