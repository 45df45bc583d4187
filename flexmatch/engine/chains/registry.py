"""Chain types registered under (kind, type), and building a chain from its YAML.

Chain types are the ``flexmatch.chains`` hook of the plug-in spine (``flexmatch.plugins``):
the built-ins (``BUILTIN``: type → class, each class's base giving its kind) and the
plug-ins' entry points register through the same path, and so does ``@register`` for
code that registers in-process. A YAML file names a registered type, never an import
path; a type's old name (``OLD_TYPES``) still loads.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from flexmatch import plugins
from flexmatch.config import ChainRef
from flexmatch.engine.chains.base import Chain, ChainContext
from flexmatch.engine.chains.kinds import KIND_BASES
from flexmatch.engine.chains.spec import CHAIN_KINDS, OLD_KINDS, load_spec
from flexmatch.errors import ConfigError

ENTRY_POINT_GROUP = plugins.CHAIN_TYPES.group
_PACKAGE = "flexmatch.engine.chains"
# the built-in chain types: each named like the chain file in chains/ that uses it
BUILTIN: tuple[tuple[str, str], ...] = (
    ("code", f"{_PACKAGE}.chunker.code:CodeChunker"),
    ("structure", f"{_PACKAGE}.chunker.structure:StructureChunker"),
    ("window", f"{_PACKAGE}.chunker.window:WindowChunker"),
    ("code-questions", f"{_PACKAGE}.matching_text.code:LLMCodeQuestions"),
    ("code-signatures", f"{_PACKAGE}.matching_text.code:CodeSignatures"),
    ("content", f"{_PACKAGE}.matching_text.content:Content"),
    ("keyphrases", f"{_PACKAGE}.matching_text.keywords:Keyphrases"),
    ("keywords", f"{_PACKAGE}.matching_text.keywords:LLMKeywords"),
    ("questions", f"{_PACKAGE}.matching_text.questions:LLMQuestions"),
    ("sentences", f"{_PACKAGE}.matching_text.sentences:Sentences"),
    ("sentence-windows", f"{_PACKAGE}.matching_text.sentences:SentenceWindows"),
    ("packed-sentences", f"{_PACKAGE}.matching_text.sentences:PackedSentences"),
    ("context", f"{_PACKAGE}.qualifying_text.context:LLMContext"),
    ("headings", f"{_PACKAGE}.qualifying_text.headings:Headings"),
    ("decompose", f"{_PACKAGE}.query_transform.follow_ups:Decompose"),
    ("identity", f"{_PACKAGE}.query_transform.identity:Identity"),
    ("keyphrases", f"{_PACKAGE}.query_transform.keywords:KeyphraseQuery"),
    ("keywords", f"{_PACKAGE}.query_transform.keywords:LLMKeywordQuery"),
    ("rewrite", f"{_PACKAGE}.query_transform.rewrite:Rewrite"),
    ("seeds", f"{_PACKAGE}.query_transform.follow_ups:Seeds"),
    ("cohere", f"{_PACKAGE}.reranker.cohere:CohereReranker"),
    ("fusion-rerank", f"{_PACKAGE}.reranker.fusion:FusionRerank"),
    ("llm-rerank", f"{_PACKAGE}.reranker.llm:LLMRerank"),
    ("none", f"{_PACKAGE}.reranker.none:NoReranker"),
    ("json", f"{_PACKAGE}.formatter.json:JsonFormatter"),
    ("markdown", f"{_PACKAGE}.formatter.markdown:MarkdownFormatter"),
)
ChainT = TypeVar("ChainT", bound=type[Chain])
KindT = TypeVar("KindT", bound=Chain)


def _kind_of(cls: type) -> str:
    for kind, base in KIND_BASES.items():
        if issubclass(cls, base):
            return kind
    bases = ", ".join(base.__name__ for base in KIND_BASES.values())
    raise TypeError(f"{cls.__name__} must subclass one chain kind's base ({bases})")


def _accept(name: str, obj: Any, origin: str) -> Iterable[tuple[tuple[str, str], type[Chain]]]:
    """A chain type class (its kind from its base), keyed by (kind, type). A module is
    one whose import registered its types with ``@register``: nothing more to add."""
    if inspect.ismodule(obj):
        return []
    if not isinstance(obj, type):
        raise TypeError(f"{type(obj).__name__} is not a chain class")
    kind = _kind_of(obj)  # refuses a class that is no chain
    chain = cast("type[Chain]", obj)
    chain.type_name = name
    return [((kind, name), chain)]


CHAIN_TYPES: plugins.Registry[tuple[str, str], type[Chain]] = plugins.Registry(
    plugins.CHAIN_TYPES, BUILTIN, _accept
)


def register(kind: str, name: str) -> Callable[[ChainT], ChainT]:
    """Class decorator: make ``cls`` the implementation of chain ``type: name`` of ``kind``,
    for code that registers in-process (an installed package declares its classes in the
    ``flexmatch.chains`` entry points). ``cls`` must subclass the base of its kind
    (``Chunker``, ``Reranker``, …). A ``(kind, name)`` another class holds is refused
    (``ValueError`` naming both): nothing replaces a built-in, nor another's type."""
    kind = OLD_KINDS.get(kind, kind)
    if kind not in CHAIN_KINDS:
        raise ValueError(f"unknown chain kind '{kind}' (kinds: {', '.join(CHAIN_KINDS)})")
    base = KIND_BASES[kind]

    def decorate(cls: ChainT) -> ChainT:
        if not issubclass(cls, base):
            raise TypeError(f"{cls.__name__} must subclass {base.__name__} to be a {kind} chain")
        CHAIN_TYPES.register(name, cls, f"{cls.__module__}:{cls.__qualname__}")
        return cls

    return decorate


def broken() -> dict[str, str]:
    """The chain plug-ins that are not used (entry point name: why)."""
    return CHAIN_TYPES.failures()


def registered() -> dict[str, list[str]]:
    """Available chain types per kind."""
    result: dict[str, list[str]] = {kind: [] for kind in CHAIN_KINDS}
    for kind, name in CHAIN_TYPES.names():
        result[kind].append(name)
    return result


def implementation(kind: str, name: str, where: str) -> type[Chain]:
    return CHAIN_TYPES.get((kind, name), f"{where}: field 'type'", registered()[kind])


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
