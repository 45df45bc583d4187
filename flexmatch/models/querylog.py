"""What the query log keeps and what is read from it: each query with its results
(``LogEntry``), each feedback event (``FeedbackEvent``), the questions that find nothing
good (``Gap``) and the golden questions made from helpful feedback (``GoldenItem``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LoggedResult(BaseModel):
    """One result of a logged query: which chunk of which document, how it scored
    (``score``: the fused score, ``dense``: its best cosine, what ``good_score`` is
    compared with)."""

    chunk_id: str
    document_id: str
    score: float
    dense: float | None = None


class LogEntry(BaseModel):
    """One query as the log keeps it. ``principal``: who asked, by name (``user:NAME``;
    ``admin`` for an unscoped call, ``anonymous`` for a principal without a user); never
    a key, a secret or a header. ``good``: whether a result the reader may see reaches
    the knowledge base's ``good_score``."""

    at: str  # ISO 8601, UTC
    tenant: str
    principal: str
    query: str
    results: list[LoggedResult] = Field(default_factory=list)
    good: bool = False


class FeedbackEvent(BaseModel):
    """Someone said whether a chunk answered a query."""

    at: str
    tenant: str
    principal: str
    query: str
    chunk_id: str
    document_id: str
    helpful: bool


class Gap(BaseModel):
    """A group of similar queries that found nothing good, or were marked unhelpful.
    ``count``: how often they were asked (or marked); ``example``: the one asked most."""

    count: int
    example: str
    queries: list[str]
    nothing_good: int = 0  # asked, and no result reached good_score
    unhelpful: int = 0  # marked unhelpful on a result


class GoldenExpect(BaseModel):
    """What a golden question expects first: a document, or a citation."""

    model_config = ConfigDict(extra="forbid")

    document: str | None = None
    citation: str | None = None


class GoldenItem(BaseModel):
    """One golden question (the format ``flexmatch eval --kb`` reads): the question, the
    document that should answer it, and documents that must not (optional)."""

    model_config = ConfigDict(extra="forbid")

    question: str
    expect: GoldenExpect
    must_not: list[str] = Field(default_factory=list)

    def as_yaml_data(self) -> dict[str, object]:
        """The item as the YAML file holds it: ``expect`` with its one key, ``must_not``
        only when there is one."""
        item: dict[str, object] = {
            "question": self.question,
            "expect": self.expect.model_dump(exclude_none=True),
        }
        if self.must_not:
            item["must_not"] = list(self.must_not)
        return item
