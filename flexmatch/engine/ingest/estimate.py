"""What an ingest or a re-index would cost, before anything is spent.

Each document is chunked with its source's real chunker and every LLM chain renders the
exact prompts it would send, its chunks grouped as an ingest groups them; a chunk whose
answer the cache already holds costs nothing. Tokens
are estimated at four characters each (no tokenizer is downloaded), the answer's length
from the chain's output rules, and the price comes from litellm's local cost map for the
chain's model (unknown models are priced at nothing and say so).

What the run would take of the machine (``footprint``) is measured where it can be: the
matching texts are made as the run makes them (an LLM's questions counted at the number
its chain asks for), reading and chunking take what they took here, and a sample of the
texts is embedded with the knowledge base's local model to measure its rate (a remote
model is not called: a dry run spends nothing). Memory and disk add, per matching text,
what this engine takes for one (``MEMORY_PER_TEXT``, ``DISK_PER_TEXT``, measured on real
folders) to what this process holds with the model loaded, and the stored copy of each
document.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Collection, Iterable
from pathlib import Path
from typing import Any

from flexmatch.engine.chains import SourceChains
from flexmatch.engine.chains.batching import ChunkBatching
from flexmatch.engine.chains.kinds import MatchingTextChain
from flexmatch.engine.embedders.base import Embedder
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
    MatchingText,
    ReindexPlan,
    Section,
)

CHARS_PER_TOKEN = 4
SAMPLE_TEXTS = 64  # matching texts embedded to measure the model's rate
# what this engine takes a matching text, from two offline runs of the default config on
# this 2-core machine: 40 READMEs of /usr/share/doc (1,219 texts: 320 MB peak RSS, 8 MB on
# disk) and a 563-file /usr/share/doc slice (232,153 texts: 4.1 GB, 736 MB); the memory a
# run holds grows with its size, so these change when the engine does
MEMORY_PER_TEXT = 16_000  # bytes of peak memory
DISK_PER_TEXT = 3_100  # bytes on disk (store, index), the documents' stored copies apart


async def estimate(
    documents: Iterable[Document] | AsyncIterable[Document],
    chains_for: Callable[[str], SourceChains],
    llm: LLM | None,
    sample: list[str] | None = None,
) -> CostEstimate:
    """Documents are taken as they come (a stream is never held whole: a dry run of a
    million-line corpus keeps one document at a time when no LLM chain needs its sections).
    ``sample`` gets the first matching texts (``SAMPLE_TEXTS``), to embed for a rate."""
    result = CostEstimate()
    pending: dict[int, tuple[ChunkBatching[Any], list[tuple[Section, Document]]]] = {}
    async for document in _each(documents):
        chains = chains_for(document.source)
        sections = await chains.chunker.run(document)
        result.documents += 1
        result.chunks += len(sections)
        result.document_tokens += len(document.text) // CHARS_PER_TOKEN
        result.matching_texts += await _matching_texts(
            chains.matching_text, sections, document, sample if sample is not None else []
        )
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


async def _matching_texts(
    chain: MatchingTextChain, sections: list[Section], document: Document, sample: list[str]
) -> int:
    """How many matching texts ``sections`` get: made as the run makes them, or for an
    LLM's chain, those known without it plus the number of items it asks for a chunk."""
    texts: list[MatchingText] = []
    asked = 0
    if isinstance(chain, ChunkBatching) and chain.model is not None:
        for section in sections:
            texts.extend(chain.known_texts(section, document))
        asked = _answer_items(chain) * len(sections)
    else:
        for section in sections:
            texts.extend(await chain.run(section, document))
    sample.extend(t.text for t in texts[: max(0, SAMPLE_TEXTS - len(sample))])
    return len(texts) + asked


def footprint(
    result: CostEstimate,
    sample: list[str],
    embedder: Embedder | None,
    read_seconds: float,
) -> CostEstimate:
    """``result`` with the time, peak memory and disk the run would take: reading as it
    took here, embedding at the rate ``embedder`` (a local model; None: not measured)
    shows on ``sample``, memory and disk per matching text on top of what is held now."""
    update: dict[str, Any] = {"read_seconds": round(read_seconds, 1)}
    if embedder is not None and sample:
        embedder.embed(sample[:8])  # the first call loads and warms the model
        started = time.perf_counter()
        embedder.embed(sample)
        rate = len(sample) / max(time.perf_counter() - started, 1e-6)
        update["embedded_per_second"] = round(rate, 1)
        update["seconds"] = round(read_seconds + result.matching_texts / rate, 1)
    held = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 + _workers_memory()
    update["peak_memory_bytes"] = held + result.matching_texts * MEMORY_PER_TEXT
    stored_copies = result.document_tokens * CHARS_PER_TOKEN
    update["disk_bytes"] = result.matching_texts * DISK_PER_TEXT + stored_copies
    return result.model_copy(update=update)


def _workers_memory() -> int:
    """The resident memory of this process's children (the parse workers), from /proc;
    0 where it cannot be read."""
    total = 0
    try:
        children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
        for child in children:
            status = Path(f"/proc/{child}/status").read_text()
            line = next((x for x in status.splitlines() if x.startswith("VmHWM:")), "")
            total += int(line.split()[1]) * 1024 if line else 0
    except (OSError, ValueError, IndexError):
        return total
    return total


async def _each(documents: Iterable[Document] | AsyncIterable[Document]) -> AsyncIterator[Document]:
    if isinstance(documents, AsyncIterable):
        async for document in documents:
            yield document
    else:
        for document in documents:
            yield document


def _answer_items(chain: ChunkBatching[Any]) -> int:
    """The items an LLM's answer holds for a chunk: the questions it asks for, or one."""
    rules = chain.spec.output
    if rules.format == "json":
        return min(rules.max_items, int(chain.spec.params.get("count", rules.max_items)))
    return 1


def _answer_tokens(chain: ChunkBatching[Any], chunks: int) -> int:
    """Expected answer length: per chunk, a list of short questions or a paragraph."""
    if chain.spec.output.format == "json":  # a list of short items per chunk
        return 10 + chunks * (_answer_items(chain) * 20)
    return 10 + chunks * (chain.spec.output.max_chars // CHARS_PER_TOKEN)


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
    embedder: Embedder | None = None,
) -> CostEstimate:
    """What indexing what a source read would cost (``pages`` fetched, ``rest`` read as
    it is estimated) and take of this machine (``footprint``, with ``embedder`` the local
    model to time); what the real run would fail on is listed with its reason, and what
    it would skip counted."""
    sample: list[str] = []
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

    started = time.perf_counter()
    result = await estimate(documents(), chains_for, llm, sample)
    read_seconds = time.perf_counter() - started
    result = footprint(result, sample, embedder, read_seconds)
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
