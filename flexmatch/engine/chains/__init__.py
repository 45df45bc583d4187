"""Smart chains: the six swappable steps of the pipeline, each defined by a YAML file.

``kinds`` holds one abstract class per step, ``registry`` maps (kind, type) to an
implementation, and each kind has a folder (named like the kind) with its built-in types.
What a knowledge base's sources resolve to: ``sources`` (each source's ingest chains),
``plan`` (the query side, ``QueryPlan``), both held by ``resolved.ResolvedChains``.
"""

from flexmatch.engine.chains.base import Chain, ChainContext
from flexmatch.engine.chains.kinds import (
    Chunker,
    Formatter,
    MatchingTextChain,
    QualifyingTextChain,
    QueryTransform,
    Reranker,
)
from flexmatch.engine.chains.plan import QueryChains, QueryPlan, SourceGroup
from flexmatch.engine.chains.registry import build_chain, register, registered
from flexmatch.engine.chains.resolved import ResolvedChains, with_query_config
from flexmatch.engine.chains.sources import SourceChainCache, SourceChains
from flexmatch.engine.chains.spec import CHAIN_KINDS, ChainSpec, load_spec

__all__ = [
    "CHAIN_KINDS",
    "Chain",
    "ChainContext",
    "ChainSpec",
    "Chunker",
    "Formatter",
    "MatchingTextChain",
    "QualifyingTextChain",
    "QueryChains",
    "QueryPlan",
    "QueryTransform",
    "Reranker",
    "ResolvedChains",
    "SourceChainCache",
    "SourceChains",
    "SourceGroup",
    "build_chain",
    "load_spec",
    "register",
    "registered",
    "with_query_config",
]
