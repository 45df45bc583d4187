"""What every smart chain shares: its spec, validated params, prompt and LLM access.

A chain implementation is a small class registered under (kind, type) with
``@register``; the YAML file names the type, never an import path. Built-ins and
plug-ins (entry point group ``flexmatch.chains``) register the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from flexmatch.chains.prompt import PromptTemplate, load_prompt
from flexmatch.chains.spec import CHAIN_KINDS, ChainSpec, load_spec
from flexmatch.config import ChainRef
from flexmatch.errors import ChainError, ConfigError
from flexmatch.llm import LLM
from flexmatch.yamlio import validate

ENTRY_POINT_GROUP = "flexmatch.chains"


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass
class ChainContext:
    """What chains may use, handed in explicitly (no globals)."""

    kb_dir: Path | None = None
    llm: LLM | None = None
    env: dict[str, str] | None = None
    notices: list[str] = field(default_factory=list)


class Chain:
    """Base of every chain: holds the spec, its typed params and (optionally) a prompt."""

    kind: ClassVar[str]
    type_name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams
    uses_llm: ClassVar[bool] = False
    prompt_variables: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, spec: ChainSpec, context: ChainContext) -> None:
        self.spec = spec
        self.context = context
        self.params: Any = validate(self.Params, spec.params, f"{spec.path}: params")
        self.prompt: PromptTemplate | None = None
        if spec.prompt:
            self.prompt = load_prompt(spec.prompt, context.kb_dir, set(self.prompt_variables))
        elif self.uses_llm:
            raise ConfigError(f"{spec.path}: field 'prompt': a '{spec.type}' chain needs a prompt")

    @property
    def llm(self) -> LLM:
        if self.context.llm is None:
            raise ChainError(f"chain '{self.spec.name}' needs an LLM and none is configured")
        return self.context.llm

    def render(self, **variables: Any) -> str:
        assert self.prompt is not None
        return self.prompt.render(params=self.spec.params, **variables)

    async def complete(self, prompt: str) -> str:
        """One LLM call for this chain (cached, retried, counted by the LLM client)."""
        return await self.llm.complete(prompt, model=self.spec.model)

    def describe(self) -> str:
        return f"{self.spec.name} ({self.kind}/{self.spec.type})"


ChainT = TypeVar("ChainT", bound=type[Chain])
_REGISTRY: dict[tuple[str, str], type[Chain]] = {}
_plugins_loaded = False


def register(kind: str, name: str) -> Callable[[ChainT], ChainT]:
    """Class decorator: make ``cls`` the implementation of chain ``type: name`` of ``kind``."""
    if kind not in CHAIN_KINDS:
        raise ValueError(f"unknown chain kind '{kind}'")

    def decorate(cls: ChainT) -> ChainT:
        cls.kind = kind
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


def build_chain(ref: ChainRef, kind: str, context: ChainContext) -> Chain:
    """Load the chain ``ref`` names, check its kind, and fall back when it needs a missing LLM."""
    spec = load_spec(ref.chain, context.kb_dir, context.env)
    if spec.kind != kind:
        raise ConfigError(
            f"{spec.path}: field 'kind': chain '{spec.name}' is a {spec.kind} chain, "
            f"but it is used as the {kind} chain"
        )
    if ref.params:
        spec = spec.model_copy(update={"params": {**spec.params, **ref.params}})
    cls = implementation(kind, spec.type, spec.path)
    if cls.uses_llm and context.llm is None:
        if not spec.fallback:
            raise ConfigError(
                f"{spec.path}: chain '{spec.name}' needs an LLM; set models.llm or name a fallback"
            )
        context.notices.append(
            f"no LLM configured: {kind} uses '{spec.fallback}' instead of '{spec.name}'"
        )
        return build_chain(ChainRef(chain=spec.fallback), kind, context)
    return cls(spec, context)
