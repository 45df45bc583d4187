"""Chain types registered under (kind, type), and building a chain from its YAML.

Built-ins and plug-ins (entry point group ``flexmatch.chains``) register the same way,
with ``@register``; a YAML file names a registered type, never an import path.
"""

from __future__ import annotations

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
_plugins_loaded = False


def register(kind: str, name: str) -> Callable[[ChainT], ChainT]:
    """Class decorator: make ``cls`` the implementation of chain ``type: name`` of ``kind``.

    ``cls`` must subclass the base of its kind (``Chunker``, ``Reranker``, …).
    """
    if kind not in CHAIN_KINDS:
        raise ValueError(f"unknown chain kind '{kind}' (kinds: {', '.join(CHAIN_KINDS)})")
    base = KIND_BASES[kind]

    def decorate(cls: ChainT) -> ChainT:
        if not issubclass(cls, base):
            raise TypeError(f"{cls.__name__} must subclass {base.__name__} to be a {kind} chain")
        cls.type_name = name
        _REGISTRY[(kind, name)] = cls
        return cls

    return decorate


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry_point.load()
        except Exception as exc:  # a broken plug-in must not take the built-ins down
            raise ConfigError(f"chain plug-in '{entry_point.name}' failed to load: {exc}") from exc


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
        raise ConfigError(
            f"{where}: field 'type': no {kind} chain type '{name}' (available: {known})"
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
