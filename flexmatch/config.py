"""The knowledge-base configuration (``flexmatch.yaml``), validated at the edge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flexmatch.yamlio import read_yaml, validate

CONFIG_FILE = "flexmatch.yaml"
LOCAL_EMBEDDING_MODEL = "local/all-MiniLM-L6-v2"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StoreConfig(_Strict):
    """Embedded Qdrant in ``path`` (relative to the knowledge base), or a server at ``url``."""

    path: str = ".flexmatch/qdrant"
    url: str | None = None
    api_key: str | None = None
    collection: str = "flexmatch"

    @field_validator("url", "api_key", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None


class ModelsConfig(_Strict):
    """Which LLM and embedding model to call, and how hard."""

    llm: str | None = None
    llm_api_base: str | None = None
    llm_api_key: str | None = None
    llm_concurrency: int = Field(8, ge=1, le=256)
    llm_timeout: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(4, ge=0, le=20)
    llm_retry_delay: float = Field(1.0, ge=0, le=60)  # first backoff step, doubling after
    embedding: str = LOCAL_EMBEDDING_MODEL
    embedding_api_base: str | None = None
    embedding_api_key: str | None = None
    embedding_batch_size: int = Field(64, ge=1, le=4096)

    @field_validator(
        "llm",
        "llm_api_base",
        "llm_api_key",
        "embedding_api_base",
        "embedding_api_key",
        mode="before",
    )
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None


class ChainRef(_Strict):
    """A chain by name (a file in ``chains/``) with optional parameter overrides."""

    chain: str
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"chain": value} if isinstance(value, str) else value


class SourceConfig(_Strict):
    """The chains one data source is ingested with."""

    chunker: ChainRef = ChainRef(chain="structure")
    matching_text: ChainRef = ChainRef(chain="questions")
    qualifying_text: ChainRef = ChainRef(chain="context")
    metadata: dict[str, Any] = Field(default_factory=dict)


class QueryConfig(_Strict):
    """The query path: transform → embed → top_k → collapse → rerank → top_n → format."""

    transform: ChainRef = ChainRef(chain="rewrite")
    top_k: int = Field(50, ge=1, le=1000)
    reranker: ChainRef = ChainRef(chain="none")
    top_n: int = Field(5, ge=1, le=100)
    formatter: ChainRef = ChainRef(chain="markdown")


class KBConfig(_Strict):
    """One knowledge base: its store, models, sources and query settings."""

    store: StoreConfig = StoreConfig()
    models: ModelsConfig = ModelsConfig()
    sources: dict[str, SourceConfig] = Field(default_factory=lambda: {"default": SourceConfig()})
    default_source: str = "default"
    query: QueryConfig = QueryConfig()

    @model_validator(mode="after")
    def _default_source_exists(self) -> KBConfig:
        if self.default_source not in self.sources:
            known = ", ".join(sorted(self.sources)) or "none"
            raise ValueError(f"default_source '{self.default_source}' is not a source ({known})")
        return self


def load_config(kb_dir: Path, env: dict[str, str] | None = None) -> KBConfig:
    """Read ``kb_dir/flexmatch.yaml``; a missing file means all defaults."""
    path = kb_dir / CONFIG_FILE
    if not path.exists():
        return KBConfig()
    return validate(KBConfig, read_yaml(path, env), str(path))


def dump_config(config: KBConfig) -> str:
    """The config as YAML, for ``init`` and for showing what is in force."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
