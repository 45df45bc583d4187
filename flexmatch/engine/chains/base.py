"""What every smart chain shares: its spec, validated params, prompt and LLM access.

A chain implementation subclasses the base of its kind (``flexmatch.engine.chains.kinds``)
and registers under (kind, type) through the plug-in spine (``registry.BUILTIN``, entry
points, ``@register``); the YAML file names the type, never
an import path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from flexmatch.engine.chains.spec import ChainKind, ChainSpec
from flexmatch.engine.llm import LLM
from flexmatch.errors import ChainError, ConfigError
from flexmatch.templates import PromptTemplate, load_prompt
from flexmatch.yamlio import validate

_WARNINGS: ContextVar[list[str] | None] = ContextVar("flexmatch_chain_warnings", default=None)


@contextmanager
def collecting_warnings() -> Iterator[list[str]]:
    """Collect what chains run inside this block report with ``Chain.warn``."""
    found: list[str] = []
    token = _WARNINGS.set(found)
    try:
        yield found
    finally:
        _WARNINGS.reset(token)


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
    """Holds the spec, its typed params and (optionally) a prompt; kinds add ``run``."""

    kind: ClassVar[ChainKind]
    type_name: ClassVar[str] = ""
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
        if self.prompt is None:
            spec = self.spec
            raise ConfigError(f"{spec.path}: field 'prompt': a '{spec.type}' chain needs one")
        return self.prompt.render(params=self.spec.params, **variables)

    @property
    def model(self) -> str | None:
        """The model that answers this chain's prompts (None when it calls no LLM)."""
        if not self.uses_llm or self.context.llm is None:
            return None
        return self.spec.model or self.context.llm.model

    def definition(self) -> dict[str, Any]:
        """Everything that decides what this chain produces: its spec (type, params,
        output rules), its prompt's text and the model; stored documents are re-indexed
        when it changes."""
        return {
            "spec": self.spec.model_dump(mode="json", exclude={"path", "description"}),
            "prompt": self.prompt.source if self.prompt is not None else None,
            "model": self.model,
        }

    def warn(self, message: str) -> None:
        """Tell the caller something did not go as configured (e.g. an LLM answer that
        could not be parsed, so a fallback was used); shown by every interface."""
        found = _WARNINGS.get()
        if found is not None:
            found.append(f"{self.spec.name}: {message}")

    async def complete(self, prompt: str, cacheable: int | None = None) -> str:
        """One LLM call for this chain (cached, retried, counted by the LLM client)."""
        return await self.llm.complete(prompt, model=self.spec.model, cacheable=cacheable)
