"""The chains an open knowledge base's config resolves to: each source's ingest chains
(``sources``), the query plan (``plan``) and the formatters callers name, each built on
first use and built again after a reload or a switch of the query settings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from flexmatch.config import (
    CONFIG_FILE,
    QUERY_SIDE,
    ChainRef,
    KBConfig,
    QueryConfig,
    SourceConfig,
    source_chain_refs,
)
from flexmatch.engine.chains.base import Chain, ChainContext
from flexmatch.engine.chains.kinds import Formatter
from flexmatch.engine.chains.plan import QueryChains, QueryPlan
from flexmatch.engine.chains.query_transform.follow_ups import FollowUps
from flexmatch.engine.chains.registry import build_chain
from flexmatch.engine.chains.sources import SourceChainCache, SourceChains
from flexmatch.models import ChainUse


class ResolvedChains:
    """One knowledge base's chains; ``config`` is read through ``current_config`` on every
    use, so a facade that swaps its config is seen."""

    def __init__(
        self, current_config: Callable[[], KBConfig], context: ChainContext, kb_dir: Path
    ) -> None:
        self._config = current_config
        self.context = context
        self.where = str(kb_dir / CONFIG_FILE)
        self._sources = SourceChainCache(lambda: current_config().sources, context, self.where)
        self._query_plan: QueryPlan | None = None
        self._formatters: dict[str, Formatter] = {}
        self._follow_ups: FollowUps | None = None

    def source(self, name: str) -> SourceChains:
        """The ingest chains ``name`` resolves to (an unknown source is named)."""
        return self._sources.get(name)

    def query_plan(self) -> QueryPlan:
        if self._query_plan is None:
            self._query_plan = QueryPlan.build(self._config(), self.context)
        return self._query_plan

    def query_chains(self, source: str | None = None) -> QueryChains:
        config = self._config()
        name = config.default_source if source is None else source
        source_chain_refs(config, name, self.where)  # an unknown source is named
        return self.query_plan().by_source[name]

    def formatter(self, name: str | None = None, *, source: str | None = None) -> Formatter:
        if name is None:
            return self.query_chains(source).formatter
        if name not in self._formatters:
            self._formatters[name] = build_chain(ChainRef(chain=name), Formatter, self.context)
        return self._formatters[name]

    def follow_ups(self) -> FollowUps:
        """The chain that writes a deep search's follow-up queries (``query.deep``)."""
        if self._follow_ups is None:
            ref = self._config().query.deep.follow_ups
            self._follow_ups = build_chain(ref, FollowUps, self.context)
        return self._follow_ups

    def reload(self) -> None:
        """Every chain built again from its files on next use."""
        self._sources.clear()
        self.forget_query()

    def forget_query(self) -> None:
        """The query side built again on next use (the query settings changed)."""
        self._query_plan = None
        self._formatters = {}
        self._follow_ups = None

    def in_use(self) -> list[ChainUse]:
        """What each source and the query path resolve to (a ``query.*`` chain once)."""
        config = self._config()
        placed: list[tuple[str, Chain]] = [
            (f"source {name}", chain)
            for name in config.sources
            for chain in self.source(name).all()
        ]
        for name, chains in self.query_plan().by_source.items():
            refs = source_chain_refs(config, name)
            for kind in QUERY_SIDE:
                where = f"source {name}" if refs[kind].own else "query"
                placed.append((where, getattr(chains, kind)))
        placed = list(dict.fromkeys(placed))
        return [
            ChainUse(where=at, kind=c.kind, chain=c.spec.name, type=c.spec.type, file=c.spec.path)
            for at, c in placed
        ]


def with_query_config(
    config: KBConfig, query: QueryConfig, sources: dict[str, SourceConfig] | None = None
) -> KBConfig:
    """``config`` with other query settings; ``sources`` gives the sources' own query chains
    too (their ingest side is kept)."""
    update: dict[str, Any] = {"query": query}
    if sources is not None:
        update["sources"] = {
            name: own.model_copy(
                update={f: getattr(sources[name], f) for f in QUERY_SIDE if name in sources}
            )
            for name, own in config.sources.items()
        }
    return config.model_copy(update=update)
