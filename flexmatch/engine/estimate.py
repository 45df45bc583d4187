"""What an ingest or a re-index would cost, before anything is spent.

Each document is chunked with its source's real chunker and every LLM chain renders the
exact prompt it would send; a prompt the LLM cache already holds costs nothing. Tokens
are estimated at four characters each (no tokenizer is downloaded), the answer's length
from the chain's output rules, and the price comes from litellm's local cost map for the
chain's model (unknown models are priced at nothing and say so).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from flexmatch.engine.chains import MatchingTextChain, QualifyingTextChain
from flexmatch.engine.ingest import SourceChains
from flexmatch.engine.llm import LLM, import_litellm
from flexmatch.models import CostEstimate, Document

CHARS_PER_TOKEN = 4


async def estimate(
    documents: Iterable[Document],
    chains_for: Callable[[str], SourceChains],
    llm: LLM | None,
) -> CostEstimate:
    result = CostEstimate()
    priced: dict[str, tuple[float, float] | None] = {}
    for document in documents:
        chains = chains_for(document.source)
        sections = await chains.chunker.run(document)
        result.documents += 1
        result.chunks += len(sections)
        result.document_tokens += len(document.text) // CHARS_PER_TOKEN
        llm_chains: list[MatchingTextChain | QualifyingTextChain] = [
            chains.matching_text,
            chains.qualifying_text,
        ]
        for chain in llm_chains:
            if llm is None or chain.model is None:
                continue
            answer_tokens = _answer_tokens(chain)
            for section in sections:
                prompt = chain.prompt_text(section, document)
                if prompt is None:
                    continue
                if llm.is_cached(prompt, model=chain.model):
                    result.cached_calls += 1
                    continue
                result.llm_calls += 1
                prompt_tokens = len(prompt) // CHARS_PER_TOKEN
                result.prompt_tokens += prompt_tokens
                result.completion_tokens += answer_tokens
                if chain.model not in priced:
                    priced[chain.model] = _price(chain.model)
                price = priced[chain.model]
                if price is None:
                    result.unpriced_models = sorted({*result.unpriced_models, chain.model})
                else:
                    result.cost_usd += prompt_tokens * price[0] + answer_tokens * price[1]
    result.cost_usd = round(result.cost_usd, 6)
    return result


def _answer_tokens(chain: MatchingTextChain | QualifyingTextChain) -> int:
    rules = chain.spec.output
    if rules.format == "json":  # a list of short items
        count = min(rules.max_items, int(chain.spec.params.get("count", rules.max_items)))
        return 10 + count * 20
    return rules.max_chars // CHARS_PER_TOKEN


def _price(model: str) -> tuple[float, float] | None:
    """USD per prompt token and per completion token, from litellm's local cost map."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = import_litellm()
    try:
        prompt, completion = litellm.cost_per_token(
            model=model, prompt_tokens=1_000_000, completion_tokens=1_000_000
        )
    except Exception:  # not in the cost map: a local or private model
        return None
    return float(prompt) / 1_000_000, float(completion) / 1_000_000
