"""The plug-ins of every hook that are not used, and why: for ``flexmatch chains``."""

from __future__ import annotations

from flexmatch import plugins
from flexmatch.engine.chains.registry import CHAIN_TYPES
from flexmatch.inputs.parsing import PARSER_REGISTRY
from flexmatch.inputs.sources.types import SOURCE_TYPES


def broken_plugins() -> dict[str, dict[str, str]]:
    """Hook (``chain type``, ``source type``, ``parser``) → plug-in name → why it is not
    used (it failed to load, or was refused)."""
    registries = {r.hook: r for r in (CHAIN_TYPES, SOURCE_TYPES, PARSER_REGISTRY)}
    return {hook.what: registries[hook].failures() for hook in plugins.HOOKS}
