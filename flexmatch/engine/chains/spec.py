"""A chain definition file (``chains/*.yaml``) as a validated model."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from flexmatch import resources
from flexmatch.errors import ConfigError
from flexmatch.yamlio import read_yaml, validate

ChainKind = Literal[
    "chunker",
    "matching_text",
    "qualifying_text",
    "query_transform",
    "reranker",
    "formatter",
]
CHAIN_KINDS: tuple[ChainKind, ...] = get_args(ChainKind)
OLD_KINDS = {"result_formatter": "formatter"}  # a kind's old spelling, still loaded
# (kind, old type name) → the type's name now (each named like its chain file): chain
# files that name the old one load
OLD_TYPES: dict[tuple[str, str], str] = {
    ("matching_text", "llm_code_questions"): "code-questions",
    ("matching_text", "code_signatures"): "code-signatures",
    ("matching_text", "llm_keywords"): "keywords",
    ("matching_text", "llm_questions"): "questions",
    ("qualifying_text", "llm_context"): "context",
    ("query_transform", "llm_keywords"): "keywords",
    ("query_transform", "llm_question"): "rewrite",
    ("reranker", "fusion"): "fusion-rerank",
    ("reranker", "llm"): "llm-rerank",
}


class OutputRules(BaseModel):
    """How an LLM chain's raw output is parsed and bounded."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["json", "text"] = "text"
    key: str | None = None  # the JSON field holding the list, e.g. "questions"
    max_items: int = Field(10, ge=1, le=100)
    max_chars: int = Field(400, ge=10, le=20000)


class ChainSpec(BaseModel):
    """One smart chain: which registered implementation runs, with what prompt and params."""

    model_config = ConfigDict(extra="forbid")

    kind: ChainKind
    type: str
    description: str = ""
    prompt: str | None = None
    model: str | None = None
    fallback: str | None = None  # chain used instead when no LLM is configured
    params: dict[str, Any] = Field(default_factory=dict)
    output: OutputRules = OutputRules()
    name: str = ""  # filled from the file name
    path: str = ""  # filled from where it was found

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """A kind's or a built-in type's old spelling, as it is called now."""
        if not isinstance(data, dict) or "kind" not in data:
            return data
        kind = data["kind"]
        kind = OLD_KINDS.get(kind, kind) if isinstance(kind, str) else kind
        old = (kind, data.get("type"))
        if isinstance(old[1], str) and old in OLD_TYPES:
            return {**data, "kind": kind, "type": OLD_TYPES[old]}
        return {**data, "kind": kind}

    def dump(self) -> str:
        """The chain file's YAML: loading it again gives this spec (``name`` and ``path``
        come from where the file is, so they are not written)."""
        data = self.model_dump(mode="json", exclude={"name", "path"}, exclude_defaults=True)
        data = {"kind": self.kind, "type": self.type, **data}
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def load_spec(
    name: str, kb_dir: Path | None, env: dict[str, str] | None = None, kind: str | None = None
) -> ChainSpec:
    """Find and validate the chain ``name`` (file stem, file name or path). Asked for as a
    ``kind`` chain, ``NAME.KIND.yaml`` comes first, so chains of two kinds can share a name
    (the ``keywords`` matching texts and the ``keywords`` query transform)."""
    suffixes = ("", ".yaml", ".yml")
    path = None
    if kind is not None and "/" not in name:
        try:
            path = resources.find("chains", f"{name}.{kind}", kb_dir, suffixes=suffixes[1:])
        except ConfigError:
            path = None
    if path is None:
        path = resources.find("chains", name, kb_dir, suffixes=suffixes)
    data = read_yaml(path, env)
    data.setdefault("name", path.stem.removesuffix(f".{kind}") if kind else path.stem)
    data["path"] = str(path)
    return validate(ChainSpec, data, str(path))
