"""The plug-in surface for chain authors: subclass a kind, register a type.

    from flexmatch.chains import QueryTransform, register

    @register("query_transform", "shout")
    class Shout(QueryTransform):
        async def run(self, query: str) -> list[str]:
            return [query.upper()]

A package makes its chain types available to every knowledge base by declaring the
classes in the ``flexmatch.chains`` entry-point group (``shout = "pkg:Shout"``: the
entry point's name is the type, the class's base its kind), the hook the built-ins
register through too (``flexmatch.plugins``).
"""

from flexmatch.engine.chains import *  # noqa: F403  (the names of its __all__)
from flexmatch.engine.chains import __all__ as _kinds_and_registry
from flexmatch.engine.chains.output import parse_json, parse_list, parse_text

__all__ = [*_kinds_and_registry, "parse_json", "parse_list", "parse_text"]
