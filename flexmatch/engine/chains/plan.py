"""The query side of each source: the chains its queries go through (its own, else
``query.*``), and the groups of sources searched together, one transform and one
reranker each (``QueryPlan``)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from flexmatch.config import ChainRef, KBConfig, source_chain_refs
from flexmatch.engine.chains.base import ChainContext
from flexmatch.engine.chains.kinds import Formatter, QueryTransform, Reranker
from flexmatch.engine.chains.registry import build_chain


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
