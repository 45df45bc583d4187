"""Smart chains: the six swappable steps of the pipeline, each defined by a YAML file.

``kinds`` holds one abstract class per step, ``registry`` maps (kind, type) to an
implementation, and each kind has a folder (named like the kind) with its built-in types.
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
from flexmatch.engine.chains.registry import build_chain, register, registered
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
    "QueryTransform",
    "Reranker",
    "build_chain",
    "load_spec",
    "register",
    "registered",
]
