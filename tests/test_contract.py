"""``KnowledgeBaseProtocol`` as both classes declare it: what mypy does not check (the
defaults, the kinds of parameters, which operations are coroutines) checked here; what
they do, on the same data, in tests/test_congruence.py."""

from __future__ import annotations

import inspect

import pytest

import flexmatch
from flexmatch import Client, KnowledgeBase, KnowledgeBaseProtocol

PROTOCOL_OPERATIONS = [
    name
    for name, member in vars(KnowledgeBaseProtocol).items()
    if inspect.isfunction(member) and not name.startswith("_")
]


@pytest.mark.parametrize("implementation", [KnowledgeBase, Client])
@pytest.mark.parametrize("name", PROTOCOL_OPERATIONS)
def test_each_operation_takes_the_protocols_parameters(implementation: type, name: str) -> None:
    """What mypy does not check: the same defaults, and the same kind of each parameter
    (an embedded knowledge base may add its own, keyword-only, with defaults)."""
    wanted = inspect.signature(getattr(KnowledgeBaseProtocol, name)).parameters
    given = inspect.signature(getattr(implementation, name)).parameters
    for parameter in wanted.values():
        assert parameter.name in given, (implementation.__name__, name, parameter.name)
        theirs = given[parameter.name]
        assert (theirs.kind, theirs.default) == (parameter.kind, parameter.default), (
            implementation.__name__,
            name,
            parameter.name,
        )
    for extra in set(given) - set(wanted):
        assert given[extra].kind is inspect.Parameter.KEYWORD_ONLY, (name, extra)
        assert given[extra].default is not inspect.Parameter.empty, (name, extra)
    is_async = inspect.iscoroutinefunction(getattr(KnowledgeBaseProtocol, name))
    assert inspect.iscoroutinefunction(getattr(implementation, name)) == is_async


def test_the_protocol_is_public_and_covers_both_twins_of_each_operation() -> None:
    assert "KnowledgeBaseProtocol" in flexmatch.__all__
    blocking = {n for n in PROTOCOL_OPERATIONS if not n.startswith("a") or n == "add_records"}
    for name in blocking - {"close"}:
        assert f"a{name}" in PROTOCOL_OPERATIONS, name
