"""What an ingest or a re-index would cost, before anything is spent.

Each document is chunked with its source's real chunker and every LLM chain renders the
exact prompts it would send, its chunks grouped as an ingest groups them; a chunk whose
answer the cache already holds costs nothing. Tokens
are estimated at four characters each (no tokenizer is downloaded), the answer's length
from the chain's output rules, and the price comes from litellm's local cost map for the
chain's model (unknown models are priced at nothing and say so).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, AsyncIterator, Callable, Collection, Iterable
from typing import Any

from flexmatch.engine.chains import SourceChains
from flexmatch.engine.chains.batching import ChunkBatching
from flexmatch.engine.ingest import (
    READ_AHEAD,
    check_size,
    check_storable,
    is_current,
    read_ahead,
    version_of,
)
from flexmatch.engine.llm import LLM, import_litellm
from flexmatch.errors import FlexMatchError
from flexmatch.inputs.sources.items import Item
from flexmatch.models import (
    CostEstimate,
    Document,
    DocumentRecord,
    FailedDocument,
    ReindexPlan,
    Section,
)

CHARS_PER_TOKEN = 4


async def estimate(
    documents: Iterable[Document] | AsyncIterable[Document],
    chains_for: Callable[[str], SourceChains],
    llm: LLM | None,
) -> CostEstimate:
    """Documents are taken as they come (a stream is never held whole: a dry run of a
    million-line corpus keeps one document at a time when no LLM chain needs its sections)."""
    result = CostEstimate()
    pending: dict[int, tuple[ChunkBatching[Any], list[tuple[Section, Document]]]] = {}
    async for document in _each(documents):
        chains = chains_for(document.source)
        sections = await chains.chunker.run(document)
        result.documents += 1
        result.chunks += len(sections)
        result.document_tokens += len(document.text) // CHARS_PER_TOKEN
        for chain in (chains.matching_text, chains.qualifying_text):
            if llm is not None and isinstance(chain, ChunkBatching) and chain.model is not None:
                pending.setdefault(id(chain), (chain, []))[1].extend(
                    (section, document) for section in sections
                )
    priced: dict[str, tuple[float, float] | None] = {}
    for batching, pairs in pending.values():
        prompts, cached = batching.planned_calls(pairs)  # grouped as the ingest would group
        result.cached_calls += cached
        result.llm_calls += len(prompts)
        model = batching.model or ""
        if model not in priced:
            priced[model] = _price(model)
        for prompt in prompts:
            prompt_tokens = len(prompt) // CHARS_PER_TOKEN
            answer_tokens = _answer_tokens(batching, prompt.count('<chunk id="') or 1)
            result.prompt_tokens += prompt_tokens
            result.completion_tokens += answer_tokens
            price = priced[model]
            if price is None:
                result.unpriced_models = sorted({*result.unpriced_models, model})
            else:
                result.cost_usd += prompt_tokens * price[0] + answer_tokens * price[1]
    result.cost_usd = round(result.cost_usd, 6)
    return result


async def _each(documents: Iterable[Document] | AsyncIterable[Document]) -> AsyncIterator[Document]:
    if isinstance(documents, AsyncIterable):
        async for document in documents:
            yield document
    else:
        for document in documents:
            yield document


def _answer_tokens(chain: ChunkBatching[Any], chunks: int) -> int:
    """Expected answer length: per chunk, a list of short questions or a paragraph."""
    rules = chain.spec.output
    if rules.format == "json":  # a list of short items per chunk
        count = min(rules.max_items, int(chain.spec.params.get("count", rules.max_items)))
        return 10 + chunks * (count * 20)
    return 10 + chunks * (rules.max_chars // CHARS_PER_TOKEN)


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


async def estimate_reading(
    pages: list[Item],
    rest: Iterable[Item],
    chains_for: Callable[[str], SourceChains],
    llm: LLM | None,
    max_document_bytes: int,
) -> CostEstimate:
    """What indexing what a source read would cost (``pages`` fetched, ``rest`` read as
    it is estimated); what the real run would fail on is listed with its reason, and
    what it would skip counted."""
    failed: list[FailedDocument] = []
    skipped: dict[str, int] = {}

    def indexable(item: Item) -> Document | None:
        """``item`` if the real run would index it; else its failure or skip noted."""
        if isinstance(item, Document):
            try:  # the checks the indexer makes before it writes anything
                check_size(item, max_document_bytes)
                check_storable(item)
                return item
            except FlexMatchError as exc:
                item = FailedDocument(uri=item.uri, error=str(exc))
        if item.skipped is not None:
            skipped[item.skipped] = skipped.get(item.skipped, 0) + 1
        else:
            failed.append(item)
        return None

    async def documents() -> AsyncIterator[Document]:  # read as they are estimated
        for page in pages:
            if (document := indexable(page)) is not None:
                yield document
        async for item in read_ahead(rest, READ_AHEAD):
            if (document := indexable(item)) is not None:
                yield document

    result = await estimate(documents(), chains_for, llm)
    return result.model_copy(update={"failed": failed, "skipped": skipped})


async def plan_reindex(
    records: list[DocumentRecord],
    configured: Collection[str],
    chains_for: Callable[[str], SourceChains],
    archived: Callable[[str], Document | None],
    llm: LLM | None,
    plan: ReindexPlan,
) -> ReindexPlan:
    """Which of ``records`` the current chains would index differently (a chain's YAML,
    params, prompt text or model changed), and what re-indexing them from their stored
    copies (``archived``) would cost; a record of a source no longer ``configured`` has
    nothing to index it with."""
    documents: list[Document] = []
    for record in records:
        plan.documents += 1
        if record.source not in configured:
            continue
        chains = chains_for(record.source)
        current = version_of(record.content_hash, record.metadata, chains)
        fresh = is_current(record, current, record.content_hash, record.metadata, chains)
        if fresh and record.status == "complete":
            continue
        plan.stale.append(record.id)
        document = archived(record.id)
        if document is None:
            plan.missing.append(record.id)
        else:
            documents.append(document)
    plan.estimate = await estimate(documents, chains_for, llm)
    return plan
