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
import time
from collections.abc import Awaitable, Callable

from flexmatch.config import DeepConfig
from flexmatch.engine.chains.base import SHOWN_INPUT, collecting_warnings
from flexmatch.engine.chains.query_transform.follow_ups import FollowUps
from flexmatch.errors import FlexMatchError
from flexmatch.models import SearchResult
from flexmatch.results import Answer, SearchCost

Search = Callable[[str, int, int | None], Awaitable[Answer]]
"""One search of the query path: (text, results wanted, candidates ranked or None for
``query.top_k``) → its answer."""
RRF_K = 10  # the fusion's rank constant: a hop's first results count most
LEADS = 1  # a follow-up's new results ranked among the earlier hops' (the rest below)


async def deep_search(
    text: str, *, search: Search, follow_ups: FollowUps, settings: DeepConfig, top_n: int
) -> Answer:
    """The answer to ``text`` from the question's own search and the follow-ups its
    results seed, hop after hop, within ``settings``' bounds, fused (``fuse``)."""
    started = time.perf_counter()
    deadline = started + settings.time_budget
    llm = follow_ups.context.llm if follow_ups.uses_llm else None
    calls, tokens = _usage(llm)
    pool = max(top_n * 2, 10)  # each hop's results: room for what fusion lifts
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
            written = await _within(follow_ups.follow_ups(text, seeds), deadline)
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
        results=fuse(hops, settings.hop_discount, top_n)[:top_n],
        warnings=[
            *first.warnings,
            *(w for hop in hops[1:] for _, a in hop for w in a.warnings),
            *warnings,
        ],
        took_ms=took,
        cost=cost,
        stage_ms=first.stage_ms,
    )


def fuse(hops: list[list[tuple[str, Answer]]], discount: float, shown: int) -> list[SearchResult]:
    """One ranked list of every hop's results. A result's score is its best reciprocal
    rank over the searches that found it, ``discount`` the less per hop after the first
    (of two equal, the earlier hop's, the better rank's, the earlier search's first). A
    later hop's search is ranked by what it found *new* (not among the first ``shown``
    results of an earlier hop), and only its first ``LEADS`` new results among the
    earlier hops' (a follow-up names one thing: its best new passage is the lead; the
    rest would push the question's own results out): it lands just below the question's
    own first results, where it is seen. Each result keeps the signals of the search
    that placed it (its best rank), with that search's hop and (after the first hop) its
    query."""
    placed: dict[str, tuple[float, tuple[int, int, int], SearchResult, str]] = {}
    for number, searches in enumerate(hops, start=1):
        weight = discount ** (number - 1)
        known = {c for h in hops[: number - 1] for _, a in h for c in _ids(a, shown)}
        for index, (query, answer) in enumerate(searches):
            new = 0
            for rank, result in enumerate(answer.results, start=1):
                if result.chunk_id not in known:
                    new += 1
                if result.chunk_id in known or (number > 1 and new > LEADS):
                    gain = 0.1 * weight / (RRF_K + rank)  # below every earlier result
                else:
                    gain = weight / (RRF_K + new)
                if result.chunk_id not in placed or placed[result.chunk_id][0] < gain:
                    order = (number, new or rank, index)  # of equal scores: hop, rank, search
                    placed[result.chunk_id] = (gain, order, result, query)
    fused = []
    for chunk_id in sorted(placed, key=lambda c: (-placed[c][0], placed[c][1])):
        gain, (hop, _, _), result, query = placed[chunk_id]
        found_by = query if hop > 1 else None
        signals = result.signals.model_copy(update={"hop": hop, "found_by": found_by})
        score = round(gain * RRF_K, 6)
        fused.append(result.model_copy(update={"signals": signals, "score": score}))
    return fused


def _ids(answer: Answer, shown: int) -> list[str]:
    return [r.chunk_id for r in answer.results[:shown]]


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
