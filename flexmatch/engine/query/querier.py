"""One knowledge base's queries: the caller's text checked, its filters and the reader's
access made the search's conditions, then ``run`` (or ``similar``), and the formatting
of what was found. The facade hands each query call here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from flexmatch.access import Principal, access_filter
from flexmatch.config import KBConfig
from flexmatch.engine.chains import ResolvedChains
from flexmatch.engine.embedders import Embedder
from flexmatch.engine.points import search_filters
from flexmatch.engine.query.deep import deep_search, store_rarity
from flexmatch.engine.query.format import format_result
from flexmatch.engine.query.log import QueryLog
from flexmatch.engine.query.run import Demotions, run_query, similar
from flexmatch.engine.stores import VectorStore
from flexmatch.models import ExpandMode, SearchResult
from flexmatch.results import Answer, Depth, SearchCost, check_depth, tool_result
from flexmatch.tools import check_expand, check_query

Expander = Callable[
    [str, Principal | None, list[SearchResult], ExpandMode, int, int], list[SearchResult]
]
"""Results with their sections or neighbours (``engine.reading.DocumentReader.expand``)."""


class QueryResources(Protocol):
    """What a query takes of an open knowledge base (``engine.runtime.Runtime`` is one)."""

    @property
    def config(self) -> KBConfig: ...
    @property
    def store(self) -> VectorStore: ...
    @property
    def embedder(self) -> Embedder: ...


class Querier:
    """The queries of one open knowledge base, over its chains."""

    def __init__(
        self,
        resources: QueryResources,
        chains: ResolvedChains,
        log: QueryLog,
        demotions: Callable[[str], Demotions] | None = None,
        expander: Expander | None = None,
    ) -> None:
        """``log``: where every search is counted (and logged when it is on);
        ``demotions``: a tenant's demotions (``FeedbackKeeper.demotions``); ``expander``:
        what gives results their sections or neighbours (``expand``)."""
        self.resources = resources
        self.chains = chains
        self.log = log
        self.demotions = demotions
        self.expander = expander

    async def search(
        self,
        text: str,
        top_n: int | None,
        top_k: int | None,
        filters: dict[str, Any] | None,
        tenant: str,
        principal: Principal | None,
        depth: Depth = "fast",
        expand: str | None = None,
    ) -> Answer:
        """The whole query path; ``principal``'s access applied inside the search. Every
        query is counted, and logged when the query log is on (the one place every
        interface's searches pass). ``depth="deep"``: its first results seed more
        searches, each of them this same path (``deep``). ``expand``: the results'
        context (None: the config's ``query.expand``), read as ``principal`` may read it."""
        check_query(text)
        check_depth(depth)
        settings = self.resources.config.query
        mode = check_expand(settings.expand if expand is None else expand)
        conditions = {**search_filters(filters), **access_filter(principal)}
        demotions = self.demotions(tenant) if self.demotions else None

        async def one(query: str, wanted: int, candidates: int | None = None) -> Answer:
            return await run_query(
                query,
                plan=self.chains.query_plan(),
                embedder=self.resources.embedder,
                store=self.resources.store,
                tenant=tenant,
                settings=settings,
                top_k=min(candidates or top_k or settings.top_k, top_k or settings.top_k),
                top_n=wanted,
                filters=conditions,
                demotions=demotions,
            )

        wanted = top_n or settings.top_n
        if depth == "deep":
            answer = await deep_search(
                text,
                search=one,
                follow_ups=self.chains.follow_ups(),
                settings=settings.deep,
                top_n=wanted,
                rarity=store_rarity(self.resources.store, tenant, conditions),
            )
        else:
            answer = await one(text, wanted)
        if self.log.settings().enabled:  # a write: off the event loop
            await asyncio.to_thread(
                self.log.record_query, answer, tenant=tenant, principal=principal
            )
        else:
            self.log.record_query(answer, tenant=tenant, principal=principal)
        if mode != "none" and self.expander is not None:
            budget, least = settings.expand_budget_tokens, settings.expand_min_tokens
            found = answer.results
            results = await asyncio.to_thread(
                self.expander, tenant, principal, found, mode, budget, least
            )
            answer = answer.model_copy(update={"results": results})
        return answer

    async def similar(
        self,
        text: str,
        top_n: int,
        filters: dict[str, Any] | None,
        tenant: str,
        principal: Principal | None,
    ) -> list[SearchResult]:
        """The chunks nearest ``text`` by embedding alone."""
        check_query(text, what="text")
        return await similar(
            text,
            embedder=self.resources.embedder,
            store=self.resources.store,
            tenant=tenant,
            top_k=max(top_n * 4, 20),
            top_n=top_n,
            filters={**search_filters(filters), **access_filter(principal)},
        )

    async def format(
        self,
        text: str,
        results: list[SearchResult],
        formatter: str | None,
        explain: bool,
        variants: list[str] | None,
        warnings: list[str] | None,
        cost: SearchCost | None = None,
    ) -> str:
        """The tool result formatted by the formatter named, else by each result's
        source's (a removed source's results format as the default source's)."""
        result = tool_result(
            text, results, explain=explain, variants=variants, warnings=warnings, cost=cost
        )
        if formatter is not None:
            return await self.chains.formatter(formatter).run(result)
        known = self.resources.config.sources
        return await format_result(
            result, lambda source: self.chains.formatter(source=source if source in known else None)
        )

    async def format_answer(self, answer: Answer, formatter: str | None, explain: bool) -> str:
        """``format`` of a whole answer: its variants, warnings and cost included."""
        return await self.format(
            answer.query,
            answer.results,
            formatter,
            explain,
            answer.variants,
            answer.warnings,
            answer.cost,
        )
