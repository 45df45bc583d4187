"""The plan of a query: the chains each source's queries go through (its own, else
``query.*``), and the groups of sources searched together, one transform and one
reranker each."""

from __future__ import annotations

import json
from dataclasses import dataclass

from flexmatch.config import ChainRef, KBConfig, source_chain_refs
from flexmatch.engine.chains import ChainContext, Formatter, QueryTransform, Reranker, build_chain
from flexmatch.engine.points import Filters


@dataclass
class QueryChains:
    """The query-side chains one source resolves to (its own, else ``query.*``)."""

    query_transform: QueryTransform
    reranker: Reranker
    formatter: Formatter


@dataclass
class SourceGroup:
    """Sources searched the same way: one transform, one reranker, one search."""

    sources: list[str]
    query_transform: QueryTransform
    reranker: Reranker
    query_transform_ref: str
    reranker_ref: str


@dataclass
class QueryPlan:
    """Every source's query chains, and the groups a search runs."""

    by_source: dict[str, QueryChains]
    groups: list[SourceGroup]
    default_source: str
    arbiter: Reranker  # query.reranker: ranks the union when groups rerank differently

    @classmethod
    def build(cls, config: KBConfig, context: ChainContext) -> QueryPlan:
        built: dict[tuple[str, str], object] = {}  # one chain object per distinct reference

        def chain(ref: ChainRef, kind: type) -> tuple[object, str]:
            key = (kind.__name__, json.dumps(ref.model_dump(mode="json"), sort_keys=True))
            if key not in built:
                built[key] = build_chain(ref, kind, context)
            return built[key], key[1]

        by_source: dict[str, QueryChains] = {}
        groups: dict[tuple[str, str], SourceGroup] = {}
        for name in config.sources:
            refs = source_chain_refs(config, name)
            transform, t_key = chain(refs["query_transform"].ref, QueryTransform)
            reranker, r_key = chain(refs["reranker"].ref, Reranker)
            formatter, _ = chain(refs["formatter"].ref, Formatter)
            assert isinstance(transform, QueryTransform) and isinstance(reranker, Reranker)
            assert isinstance(formatter, Formatter)
            by_source[name] = QueryChains(transform, reranker, formatter)
            group = groups.setdefault(
                (t_key, r_key), SourceGroup([], transform, reranker, t_key, r_key)
            )
            group.sources.append(name)
        arbiter, _ = chain(config.query.reranker, Reranker)
        assert isinstance(arbiter, Reranker)
        return cls(
            by_source=by_source,
            groups=list(groups.values()),
            default_source=config.default_source,
            arbiter=arbiter,
        )


def group_scopes(
    groups: list[SourceGroup], default_source: str, filters: Filters | None
) -> list[tuple[SourceGroup, Filters, Filters | None]]:
    """Each group with what it searches: its own sources (when there are several groups)
    within any source the caller asked for. The default source's group also searches
    the sources the configuration no longer names (documents of a removed source stay
    findable), by leaving out the other groups' sources instead of naming its own. A
    group the caller's sources exclude is left out."""
    if len(groups) == 1:
        return [(groups[0], dict(filters or {}), None)]
    asked = (filters or {}).get("source")
    wanted: set[str] | None = None
    if asked is not None:
        wanted = {str(s) for s in asked} if isinstance(asked, list) else {str(asked)}
    configured = {s for g in groups for s in g.sources}
    scopes: list[tuple[SourceGroup, Filters, Filters | None]] = []
    for group in groups:
        if default_source in group.sources:
            others = sorted(configured - set(group.sources))
            if wanted is None:
                scopes.append((group, dict(filters or {}), {"source": others}))
                continue
            mine = [s for s in wanted if s in group.sources or s not in configured]
        else:
            mine = [s for s in group.sources if wanted is None or s in wanted]
        if mine:
            scopes.append((group, {**(filters or {}), "source": sorted(mine)}, None))
    return scopes
