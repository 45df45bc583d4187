"""Smart chains: the six swappable steps of the pipeline, each defined by a YAML file.

``kinds`` holds one abstract class per step, ``registry`` maps (kind, type) to an
implementation, and each kind has a folder with one module per built-in type.
"""

from flexmatch.engine.chains import (  # noqa: F401  (importing registers the built-ins)
    chunkers,
    formatters,
    matching,
    qualifying,
    query_transform,
    rerankers,
)
from flexmatch.engine.chains.base import Chain, ChainContext
from flexmatch.engine.chains.kinds import (
    Chunker,
    MatchingTextChain,
    QualifyingTextChain,
    QueryTransform,
    Reranker,
    ResultFormatter,
)
from flexmatch.engine.chains.registry import build_chain, register, registered
from flexmatch.engine.chains.spec import CHAIN_KINDS, ChainSpec, load_spec

__all__ = [
    "CHAIN_KINDS",
    "Chain",
    "ChainContext",
    "ChainSpec",
    "Chunker",
    "MatchingTextChain",
    "QualifyingTextChain",
    "QueryTransform",
    "Reranker",
    "ResultFormatter",
    "build_chain",
    "load_spec",
    "register",
    "registered",
]
