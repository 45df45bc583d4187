"""Smart chains: the six swappable steps of the pipeline, each defined by a YAML file."""

from flexmatch.chains import (  # noqa: F401  (importing registers the built-ins)
    chunkers,
    formatters,
    matching,
    qualifying,
    query_transform,
    rerankers,
)
from flexmatch.chains.base import Chain, ChainContext, build_chain, register, registered
from flexmatch.chains.spec import CHAIN_KINDS, ChainSpec, load_spec

__all__ = [
    "CHAIN_KINDS",
    "Chain",
    "ChainContext",
    "ChainSpec",
    "build_chain",
    "load_spec",
    "register",
    "registered",
]
