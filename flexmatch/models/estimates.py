"""What an ingest or a reindex would take, found before running it."""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field

from flexmatch.models.reports import FailedDocument


class CostEstimate(BaseModel):
    """What indexing some documents would take: chunks, LLM calls and their price."""

    documents: int = 0
    chunks: int = 0
    document_tokens: int = 0  # the documents' own text, ~4 characters a token
    llm_calls: int = 0  # calls that would be made and paid for
    cached_calls: int = 0  # chunk answers the LLM cache already holds: free
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_models: list[str] = Field(default_factory=list)  # not in litellm's cost map
    # what the run would take of this machine (``footprint``): the texts it would embed,
    # the time (reading and chunking as this dry run took them, embedding at the rate
    # measured here; the LLM's calls not included), its peak memory and the disk it adds
    matching_texts: int = 0
    read_seconds: float = 0.0  # this dry run's reading and chunking
    embedded_per_second: float | None = None  # measured here on a sample (a local model)
    seconds: float | None = None  # reading + embedding; None: no local rate to go by
    peak_memory_bytes: int | None = None
    disk_bytes: int = 0
    # what the real run would fail on, each with the reason it would give (a missing path,
    # an unsupported type, over the size cap...), and the files a folder walk would pass
    # over, by reason: a dry run shows them and exits as the real run would
    failed: list[FailedDocument] = Field(default_factory=list)
    skipped: dict[str, int] = Field(default_factory=dict)
    removed: list[str] = Field(default_factory=list)  # with prune: what it would remove
    warnings: list[str] = Field(default_factory=list)  # with prune: why it would not

    @computed_field  # type: ignore[prop-decorator]
    @property
    def calls_per_chunk(self) -> float:
        """LLM calls an ingest would make per chunk (cached chunks need none)."""
        return round(self.llm_calls / self.chunks, 3) if self.chunks else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cost_per_million_document_tokens(self) -> float | None:
        if not self.document_tokens:
            return None
        return round(self.cost_usd * 1_000_000 / self.document_tokens, 4)


class ReindexPlan(BaseModel):
    """What ``reindex`` found: which documents the current chains would index differently."""

    tenant: str
    source: str | None = None
    documents: int = 0  # looked at
    stale: list[str] = Field(default_factory=list)  # ids whose version would change
    missing: list[str] = Field(default_factory=list)  # stale, with no archived copy to re-read
    estimate: CostEstimate = Field(default_factory=CostEstimate)
