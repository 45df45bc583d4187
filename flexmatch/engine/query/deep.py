"""Deep search: the first results seed more searches, and every search's results are
fused into one ranked list.

A question whose answer spans two passages often names only the first ("Who founded the
label that released Blue Train?"): the first search finds the album, whose passage names
the label, whose own passage the question never names. Deep search reads the first
results, has the follow-up chain (``query.deep.follow_ups``: an LLM decomposes the
question; with none, the names and titles of the first results) write the searches still
needed, runs them, and fuses everything, each result marked with the hop that found it
(``Signals.hop``, ``found_by``).

Every hop is the one query path (``search``: the caller's tenant, principal and filters,
the same engine search as a fast query), so a hop sees only what the caller may read,
and the follow-ups are written only from what it found. Bounded by ``query.deep``: hops,
searches and a time budget; what it cost is the answer's ``cost``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

from flexmatch.config import DeepConfig
from flexmatch.engine.chains.base import SHOWN_INPUT, collecting_warnings
from flexmatch.engine.chains.query_transform.follow_ups import FollowUps, Rarity
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.points import CONTENT, Filters
from flexmatch.engine.stores import Hit, VectorStore
from flexmatch.engine.stores import Search as StoreSearch
from flexmatch.engine.stores.base import lexical_query
from flexmatch.errors import FlexMatchError
from flexmatch.models import SearchResult
from flexmatch.results import Answer, SearchCost

Search = Callable[[str, int, int | None], Awaitable[Answer]]
"""One search of the query path: (text, results wanted, candidates ranked or None for
``query.top_k``) → its answer."""
RRF_K = 10  # the fusion's rank constant: a hop's first results count most
RARITY_CAP = 64  # passages counted for a word's rarity: a word in more is common


async def deep_search(
    text: str,
    *,
    search: Search,
    follow_ups: FollowUps,
    settings: DeepConfig,
    top_n: int,
    rarity: Rarity | None = None,
) -> Answer:
    """The answer to ``text`` from the question's own search and the follow-ups its
    results seed, hop after hop, within ``settings``' bounds, fused (``fuse``).
    ``rarity``: how rare words are among what the caller may search (``store_rarity``),
    for a follow-up chain that weighs them."""
    started = time.perf_counter()
    deadline = started + settings.time_budget
    llm = follow_ups.context.llm if follow_ups.uses_llm else None
    calls, tokens = _usage(llm)
    # each search's results read: with a result's best rank as its score, one ranked
    # below a search's first top_n is below those top_n after fusion too (``fuse``), so
    # reading further changes nothing shown while each search ranks the same candidates
    # (up to top_n 25 for the question, 10 for a follow-up, at the default top_k and
    # follow_up_top_k). The first search's results also seed the next hop; past two hops
    # a follow-up's result is new when no earlier search's first ``pool`` held it
    pool = max(top_n, settings.seed_results)
    first = await search(text, pool, None)
    hops: list[list[tuple[str, Answer]]] = [[(text, first)]]
    cost = SearchCost(hops=1, searches=1)
    asked: set[str] = {text.strip().lower()}
    seeds = first.results[: settings.seed_results]
    with collecting_warnings() as warnings:
        while len(hops) < settings.max_hops and seeds:
            stop = _stop(cost, settings, deadline)
            if stop:
                cost.stopped = stop
                break
            writing = (
                follow_ups.follow_ups(text, seeds, rarity)  # type: ignore[call-arg]
                if rarity is not None and getattr(follow_ups, "reads_rarity", False)
                else follow_ups.follow_ups(text, seeds)
            )
            written = await _within(writing, deadline)
            if written is None:
                cost.stopped = "time_budget"
                break
            fresh = [q for q in dict.fromkeys(written) if q.strip().lower() not in asked]
            room = settings.max_searches - cost.searches
            if len(fresh) > room:
                cost.stopped = "max_searches"
            queries = fresh[:room]
            if not queries:
                break
            asked |= {q.strip().lower() for q in queries}
            found = await _hop(queries, search, pool, settings.follow_up_top_k, deadline, warnings)
            if len(found) < len(queries) and time.perf_counter() >= deadline:
                cost.stopped = "time_budget"
            cost.searches += len(queries)
            cost.follow_ups += queries
            if not found:
                break
            hops.append(found)
            cost.hops = len(hops)
            seen = {r.chunk_id for hop in hops[:-1] for _, a in hop for r in a.results}
            seeds = [r for _, a in found for r in a.results[:1] if r.chunk_id not in seen][
                : settings.seed_results
            ]
    calls_now, tokens_now = _usage(llm)
    cost.llm_calls, cost.llm_tokens = calls_now - calls, tokens_now - tokens
    took = round((time.perf_counter() - started) * 1000, 1)
    cost.took_ms = took
    return Answer(
        query=text,
        variants=first.variants,
        results=fuse(hops, settings.hop_discount)[:top_n],
        warnings=[
            *first.warnings,
            *(w for hop in hops[1:] for _, a in hop for w in a.warnings),
            *warnings,
        ],
        took_ms=took,
        cost=cost,
        stage_ms=first.stage_ms,
    )


def fuse(hops: list[list[tuple[str, Answer]]], discount: float) -> list[SearchResult]:
    """One ranked list of every hop's results. A result's score is its best reciprocal
    rank over the searches that found it, ``discount`` the less per hop after the first
    (of two equal, the earlier hop's, the better rank's, the earlier search's first).
    Each follow-up counts by its own ranks: its first result (what the name it searched
    found) lands just below the question's own first results, and one whose first
    results are the question's own passages again found nothing new, so what it found
    next stays low (promoting a follow-up's first *new* result instead put more wrong
    passages in the top 5: docs/benchmarks.md). Each result keeps the signals of the
    search that placed it (its best rank), with that search's hop and (after the first
    hop) its query."""
    placed: dict[str, tuple[float, tuple[int, int, int], SearchResult, str]] = {}
    for number, searches in enumerate(hops, start=1):
        weight = discount ** (number - 1)
        for index, (query, answer) in enumerate(searches):
            for rank, result in enumerate(answer.results, start=1):
                gain = weight / (RRF_K + rank)
                if result.chunk_id not in placed or placed[result.chunk_id][0] < gain:
                    order = (number, rank, index)  # of equal scores: hop, rank, search
                    placed[result.chunk_id] = (gain, order, result, query)
    fused = []
    for chunk_id in sorted(placed, key=lambda c: (-placed[c][0], placed[c][1])):
        gain, (hop, _, _), result, query = placed[chunk_id]
        found_by = query if hop > 1 else None
        signals = result.signals.model_copy(update={"hop": hop, "found_by": found_by})
        score = round(gain * RRF_K, 6)
        fused.append(result.model_copy(update={"signals": signals, "score": score}))
    return fused


def store_rarity(store: VectorStore, tenant: str, filters: Filters) -> Rarity:
    """Rarity from the knowledge base's own BM25 index: the passages holding a word
    counted (up to ``RARITY_CAP``) by a search for the word alone, among the passages the
    caller may search (its tenant, access and filters: a word's rarity tells nothing
    about what it may not read), all words in one batch. A stopword is common."""
    scope: Filters = {**filters, "match_kind": CONTENT}
    top = math.log(RARITY_CAP + 1)

    fields = ("document_id", "version")

    def searched(asked: list[str], read: tuple[str, ...]) -> list[list[Hit]]:
        searches = [StoreSearch(RARITY_CAP, text=w, filters=scope, fields=read) for w in asked]
        return store.search_batch(tenant, searches) if searches else []

    def counted(words: list[str]) -> dict[str, float]:
        asked = [w for w in dict.fromkeys(words) if lexical_query(w) is not None]
        # committed versions only: a version being written may carry another access. With
        # no write in flight (read after the searches, as ``Visibility`` asks) every hit
        # counts and no payload is needed; they cost three quarters of the look-up
        found = searched(asked, ())
        seen = DocumentRegistry(store).visibility(tenant) if found else None
        if seen is not None and seen.unfinished:  # whose version each hit is, then
            found = searched(asked, fields)
            seen = DocumentRegistry(store).visibility(tenant)
        held = {
            w: len({h.id for h in hits if seen is not None and seen(h)})
            for w, hits in zip(asked, found, strict=True)
        }
        return {w: math.log((RARITY_CAP + 1) / (held.get(w, RARITY_CAP) + 1)) / top for w in words}

    async def rarity(words: list[str]) -> dict[str, float]:
        return await asyncio.to_thread(counted, words)

    return rarity


async def _hop(
    queries: list[str],
    search: Search,
    pool: int,
    top_k: int,
    deadline: float,
    failed: list[str],
) -> list[tuple[str, Answer]]:
    """The follow-ups searched at once (each ranking ``top_k`` candidates: a follow-up
    names one thing, so fewer than the question's search); those not done by the
    deadline are dropped, and one the engine refuses is dropped with a warning in
    ``failed`` (a bug still raises)."""
    tasks = [asyncio.ensure_future(search(q, pool, top_k)) for q in queries]
    done, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.perf_counter()))
    for task in pending:
        task.cancel()
    found = []
    for query, task in zip(queries, tasks, strict=True):
        if task not in done:
            continue
        error = task.exception()
        if isinstance(error, FlexMatchError):  # one follow-up refused: the others stand
            failed.append(f"deep search: the follow-up {query[:SHOWN_INPUT]!r} failed: {error}")
        elif error is not None:
            raise error
        else:
            found.append((query, task.result()))
    return found


async def _within(work: Awaitable[list[str]], deadline: float) -> list[str] | None:
    """``work``'s result, or None when the deadline passes first."""
    try:
        return await asyncio.wait_for(work, timeout=max(0.0, deadline - time.perf_counter()))
    except TimeoutError:
        return None


def _stop(cost: SearchCost, settings: DeepConfig, deadline: float) -> str | None:
    if cost.searches >= settings.max_searches:
        return "max_searches"
    if time.perf_counter() >= deadline:
        return "time_budget"
    return None


def _usage(llm: object) -> tuple[int, int]:
    """The LLM's calls and tokens so far (what a deep search took is the difference;
    a query running meanwhile may add its own)."""
    usage = getattr(llm, "usage", None)
    if usage is None:
        return 0, 0
    return int(usage.calls), int(usage.prompt_tokens + usage.completion_tokens)
