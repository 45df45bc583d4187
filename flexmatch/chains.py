"""The plug-in surface for chain authors: subclass a kind, register a type.

    from flexmatch.chains import QueryTransform, register

    @register("query_transform", "shout")
    class Shout(QueryTransform):
        async def run(self, query: str) -> list[str]:
            return [query.upper()]

A package makes its chains available to every knowledge base through the
``flexmatch.chains`` entry-point group, the same way the built-ins register.
"""

from flexmatch.engine.chains import (
    CHAIN_KINDS,
    Chain,
    ChainContext,
    ChainSpec,
    Chunker,
    MatchingTextChain,
    QualifyingTextChain,
    QueryTransform,
    Reranker,
    ResultFormatter,
    build_chain,
    load_spec,
    register,
    registered,
)
from flexmatch.engine.chains.output import parse_json, parse_list, parse_text

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
    "parse_json",
    "parse_list",
    "parse_text",
    "register",
    "registered",
]
