"""What every smart chain shares: its spec, validated params, prompt and LLM access.

A chain implementation subclasses the base of its kind (``flexmatch.engine.chains.kinds``)
and registers under (kind, type) through the plug-in spine (``registry.BUILTIN``, entry
points, ``@register``); the YAML file names the type, never
an import path.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from flexmatch.engine.chains.spec import ChainKind, ChainSpec
from flexmatch.engine.llm import LLM
from flexmatch.errors import ChainError, ConfigError, FlexMatchError
from flexmatch.models import Document
from flexmatch.results import ToolResult
from flexmatch.templates import PromptTemplate, load_prompt
from flexmatch.yamlio import validate

T = TypeVar("T")
_WARNINGS: ContextVar[list[str] | None] = ContextVar("flexmatch_chain_warnings", default=None)
# the sources a query chain runs for (a query chain may serve several; see ``for_sources``)
_SOURCES: ContextVar[tuple[str, ...]] = ContextVar("flexmatch_chain_sources", default=())
SHOWN_INPUT = 80  # characters of a query or URI a chain failure quotes


@contextmanager
def collecting_warnings() -> Iterator[list[str]]:
    """Collect what chains run inside this block report with ``Chain.warn``."""
    found: list[str] = []
    token = _WARNINGS.set(found)
    try:
        yield found
    finally:
        _WARNINGS.reset(token)


async def for_sources(sources: Iterable[str], work: Awaitable[T]) -> T:
    """Await a query chain's ``work`` for ``sources``: a failure of the chain names them."""
    token = _SOURCES.set(tuple(sources))
    try:
        return await work
    finally:
        _SOURCES.reset(token)


def _quoted(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= SHOWN_INPUT else text[: SHOWN_INPUT - 3] + "...")


def _subject(args: tuple[Any, ...]) -> str:
    """What a chain was run on, for its failure: the source and the document or query."""
    document = next((a for a in args if isinstance(a, Document)), None)
    if document is not None:
        return f"source {document.source!r}, document {_quoted(document.uri or document.id)}"
    sources = _SOURCES.get()
    named = f"source {', '.join(map(repr, sources))}, " if sources else ""
    query = next((a for a in args if isinstance(a, str)), None)
    if query is None:
        query = next((a.query for a in args if isinstance(a, ToolResult)), None)
    return f"{named}query {_quoted(query)}" if query is not None else named.rstrip(", ")


def _reported(run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` with an unexpected error turned into a ``ChainError`` naming the chain, its
    kind, the source and the input, chained from the original (a ``FlexMatchError``, an
    LLM's or a nested chain's, passes as it is)."""

    def failure(chain: Chain, args: tuple[Any, ...], exc: Exception) -> ChainError:
        subject = _subject(args)
        on = f" on {subject}" if subject else ""
        return ChainError(f"{chain.label} failed{on}: {type(exc).__name__}: {exc}")

    if inspect.iscoroutinefunction(run):

        @functools.wraps(run)
        async def reported_async(self: Chain, *args: Any, **kwargs: Any) -> Any:
            try:
                return await run(self, *args, **kwargs)
            except FlexMatchError:
                raise
            except Exception as exc:
                raise failure(self, args, exc) from exc

        return reported_async

    @functools.wraps(run)
    def reported(self: Chain, *args: Any, **kwargs: Any) -> Any:  # a plug-in's plain ``run``
        try:
            return run(self, *args, **kwargs)
        except FlexMatchError:
            raise
        except Exception as exc:
            raise failure(self, args, exc) from exc

    return reported


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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every ``run`` a chain class defines, built-in or plug-in, is wrapped once
        (``_reported``): the one place a chain's failure gets its context."""
        super().__init_subclass__(**kwargs)
        run = cls.__dict__.get("run")
        if callable(run) and not getattr(run, "__isabstractmethod__", False):
            cls.run = _reported(run)  # type: ignore[attr-defined]

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
    def label(self) -> str:
        """How messages name this chain: ``chunker chain 'code' (type 'code')``."""
        return f"{self.kind} chain '{self.spec.name}' (type '{self.spec.type}')"

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
