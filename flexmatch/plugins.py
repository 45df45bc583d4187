"""Plug-ins through entry points: the one way source types and parsers (and any further
kind) are found, loaded and kept apart from each other.

Each kind is an entry-point group (``flexmatch.sources``, ``flexmatch.parsers``); the
built-ins are declared in the same group by this package and listed in the code too, so a
source checkout without installed metadata still has them. A plug-in that fails to load,
or a name two plug-ins declare, is remembered with the reason, never raised: it is named
when a setting asks for it, and every other plug-in keeps working. No plug-in can take a
built-in's name.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

Register = Callable[[str, Any, str], None]
"""Takes a loaded plug-in (its name, the object, where it came from), or raises to refuse."""


def load_entry_points(
    group: str,
    builtin: Mapping[str, str],
    register: Register,
    broken: dict[str, str],
    registered: Container[str] = (),
) -> None:
    """Load every plug-in of ``group`` once through ``register``; those already
    ``registered`` in-process are left alone, failures go to ``broken`` (name → reason)."""
    found: dict[str, list[EntryPoint]] = {}
    for entry_point in entry_points(group=group):
        declared = builtin.get(entry_point.name)
        if declared is not None and entry_point.value != declared:
            continue  # a built-in's name is taken (stale metadata, or another package)
        same = found.setdefault(entry_point.name, [])
        if all(e.value != entry_point.value for e in same):
            same.append(entry_point)
    for name, value in builtin.items():  # a source checkout without installed metadata
        found.setdefault(name, [EntryPoint(name, value, group)])
    for name, candidates in sorted(found.items()):
        if name in registered:
            continue
        if len(candidates) > 1:
            values = " and ".join(f"'{e.value}'" for e in candidates)
            broken[name] = f"two plug-ins declare it ({values})"
            continue
        (entry_point,) = candidates
        try:
            register(name, entry_point.load(), entry_point.value)
        except Exception as exc:  # any error in a plug-in's import or shape is the plug-in's
            broken[name] = f"'{entry_point.value}' failed to load: {type(exc).__name__}: {exc}"
