"""Chain types registered under (kind, type), and building a chain from its YAML.

Built-ins and plug-ins (entry point group ``flexmatch.chains``) register the same way,
with ``@register``; a YAML file names a registered type, never an import path. A
registration never replaces another: the built-ins register first, so no plug-in can
swap one out. A plug-in that fails to load is remembered and named when a chain asks
for a type nobody registered (and by ``flexmatch chains``), so it never stops a
knowledge base that does not use it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TypeVar

from flexmatch.config import ChainRef
from flexmatch.engine.chains.base import Chain, ChainContext
from flexmatch.engine.chains.kinds import KIND_BASES
from flexmatch.engine.chains.spec import CHAIN_KINDS, load_spec
from flexmatch.errors import ConfigError

ENTRY_POINT_GROUP = "flexmatch.chains"

ChainT = TypeVar("ChainT", bound=type[Chain])
KindT = TypeVar("KindT", bound=Chain)
_REGISTRY: dict[tuple[str, str], type[Chain]] = {}
_BROKEN: dict[str, str] = {}  # chain plug-ins (entry point names) that failed to load, and why
_plugins_loaded = False
_log = logging.getLogger("flexmatch.chains")


def _where(cls: type) -> str:
    built_in = " (built-in)" if cls.__module__.split(".")[0] == "flexmatch" else ""
    return f"{cls.__module__}:{cls.__qualname__}{built_in}"


def register(kind: str, name: str) -> Callable[[ChainT], ChainT]:
    """Class decorator: make ``cls`` the implementation of chain ``type: name`` of ``kind``.

    ``cls`` must subclass the base of its kind (``Chunker``, ``Reranker``, …). A
    ``(kind, name)`` another class holds is refused (``ValueError`` naming both): a
    plug-in cannot replace a built-in, nor another plug-in's type.
    """
    if kind not in CHAIN_KINDS:
        raise ValueError(f"unknown chain kind '{kind}' (kinds: {', '.join(CHAIN_KINDS)})")
    base = KIND_BASES[kind]

    def decorate(cls: ChainT) -> ChainT:
        if not issubclass(cls, base):
            raise TypeError(f"{cls.__name__} must subclass {base.__name__} to be a {kind} chain")
        holder = _REGISTRY.get((kind, name))
        if holder is not None and _where(holder) != _where(cls):  # same class again: a reload
            raise ValueError(
                f"{kind} chain type '{name}' is already registered by {_where(holder)}; "
                f"{_where(cls)} cannot replace it (register it under another name)"
            )
        cls.type_name = name
        _REGISTRY[(kind, name)] = cls
        return cls

    return decorate


def _load_plugins() -> None:
    """Load every plug-in once, after the built-ins (so none can take a built-in's name).
    One that fails to load is remembered and logged, never raised: it would otherwise
    stop every knowledge base in the environment, even those that do not use it."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    # the built-ins are registered already: this module is only reached through its
    # package, whose import registers them (its __init__ imports every built-in type)

    for entry_point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            entry_point.load()
        except Exception as exc:  # any error in a plug-in's import is the plug-in's
            reason = f"'{entry_point.value}' failed to load: {type(exc).__name__}: {exc}"
            _BROKEN[entry_point.name] = reason
            _log.warning("chain plug-in '%s': %s", entry_point.name, reason)


def broken() -> dict[str, str]:
    """The chain plug-ins that failed to load (entry point name: why)."""
    _load_plugins()
    return dict(_BROKEN)


def registered() -> dict[str, list[str]]:
    """Available chain types per kind."""
    _load_plugins()
    result: dict[str, list[str]] = {kind: [] for kind in CHAIN_KINDS}
    for kind, name in sorted(_REGISTRY):
        result[kind].append(name)
    return result


def implementation(kind: str, name: str, where: str) -> type[Chain]:
    _load_plugins()
    try:
        return _REGISTRY[(kind, name)]
    except KeyError:
        known = ", ".join(registered()[kind]) or "none"
        failed = "".join(
            f"; chain plug-in '{plugin}' may provide it, but {reason}"
            for plugin, reason in sorted(_BROKEN.items())
        )
        raise ConfigError(
            f"{where}: field 'type': no {kind} chain type '{name}' (available: {known}){failed}"
        ) from None


def build_chain(ref: ChainRef, kind: type[KindT], context: ChainContext) -> KindT:
    """Load the chain ``ref`` names as a ``kind`` chain, falling back when it needs an LLM
    and none is configured."""
    spec = load_spec(ref.chain, context.kb_dir, context.env, kind.kind)
    if spec.kind != kind.kind:
        raise ConfigError(
            f"{spec.path}: field 'kind': chain '{spec.name}' is a {spec.kind} chain, "
            f"but it is used as the {kind.kind} chain"
        )
    if ref.params:
        spec = spec.model_copy(update={"params": {**spec.params, **ref.params}})
    cls = implementation(spec.kind, spec.type, spec.path)
    if cls.uses_llm and context.llm is None:
        if not spec.fallback:
            raise ConfigError(
                f"{spec.path}: chain '{spec.name}' needs an LLM; set models.llm or name a fallback"
            )
        context.notices.append(
            f"no LLM configured: {spec.kind} uses '{spec.fallback}' instead of '{spec.name}'"
        )
        return build_chain(ChainRef(chain=spec.fallback), kind, context)
    chain = cls(spec, context)
    if not isinstance(chain, kind):  # register() checks this; a plug-in may have cheated
        raise ConfigError(f"{spec.path}: type '{spec.type}' is not a {kind.kind} chain")
    return chain
