"""What an ingest did: the ``IngestReport``, one ``DocumentOutcome`` per input, the
documents it failed or skipped, and the LLM ``Usage`` it cost."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

TOO_LARGE = "over the byte cap"
"""The skip reason of a walked file over ``ingest.max_document_bytes`` (compressed: what
it holds): the report warns of each one, as the cap may be worth raising."""


class FailedDocument(BaseModel):
    """A document that could not be ingested, and why. ``skipped`` names why a file a
    folder walk found was passed over rather than failed (``unsupported type``,
    ``binary file``, ``empty``, ``over the byte cap``, or why its text is no prose:
    ``PostScript``, ``symbol table``, ``minified``, ``generated data``, ``encoded
    data``): counted and listed by reason, never an error."""

    uri: str
    error: str
    skipped: str | None = None


class SkippedDocument(BaseModel):
    """A document that was not stored because an identical one already is."""

    uri: str
    document_id: str
    reason: str


class Usage(BaseModel):
    """LLM usage summed over a run."""

    calls: int = 0  # calls made (and paid for)
    cached_calls: int = 0  # answers the LLM cache gave instead
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens the provider served from its cache
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage) -> None:
        """Count ``other`` in (a worker's share, a job's next report), in place: callers
        hold on to this object."""
        for name, value in other:
            setattr(self, name, getattr(self, name) + value)
        self.cost_usd = round(self.cost_usd, 6)

    def __sub__(self, other: Usage) -> Usage:
        """What was used since ``other`` (a snapshot taken before)."""
        since = Usage(**{name: value - getattr(other, name) for name, value in self})
        since.cost_usd = round(since.cost_usd, 6)
        return since


Outcome = Literal["added", "changed", "unchanged", "duplicate", "failed"]


class DocumentOutcome(BaseModel):
    """What happened to one input of an ingest (a file, a URL or a record)."""

    input: str = Field(description="The file name, URL or record index.")
    outcome: Outcome
    document_id: str | None = None
    chunks: int = 0
    matching_texts: int = 0
    error: str | None = Field(None, description="Why it failed, or what it duplicates.")

    def summary(self) -> dict[str, str]:
        """A short account for an agent: input, status and a one-line detail."""
        if self.outcome in ("failed", "duplicate"):
            detail = self.error or ""
        elif self.outcome == "unchanged":
            detail = "already stored"
        else:
            detail = f"stored as {self.chunks} chunk{'' if self.chunks == 1 else 's'}"
        return {"input": self.input, "status": self.outcome, "detail": detail}


class IngestProgress(BaseModel):
    """One progress event of a run under way (``ingest --json`` writes one a line): how
    far it is and what it has stored, without the per-document lists."""

    event: Literal["progress"] = "progress"
    planned: int  # documents the run found to read
    processed: int  # of them, done (stored, unchanged, duplicate, failed or skipped)
    added: int
    changed: int
    unchanged: int
    failed: int
    skipped: int
    chunks: int
    matching_texts: int
    llm_calls: int
    seconds: float  # since the run started


class IngestReport(BaseModel):
    """What an ingest did: counts, skips, failures and what it cost.

    ``planned`` is how many documents the run found to read (known before the first one
    is done, so a progress bar can size itself from the first progress callback).
    """

    planned: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    chunks: int = 0
    matching_texts: int = 0
    document_tokens: int = 0  # of the documents written, ~4 characters a token
    near_duplicate_chunks: int = 0
    # matching texts of the documents written: embedded now, or reused from the stored
    # version of the same document (same text, same model: same vector)
    texts_embedded: int = 0
    texts_reused: int = 0
    repaired: int = 0
    document_ids: list[str] = Field(default_factory=list)  # stored or unchanged, in order
    duplicates: list[SkippedDocument] = Field(default_factory=list)
    failed: list[FailedDocument] = Field(default_factory=list)
    # files a folder walk passed over (an unsupported type, a binary blob, no text): how
    # many by reason, and which (their ``error`` says why)
    skipped: dict[str, int] = Field(default_factory=dict)
    skipped_files: list[FailedDocument] = Field(default_factory=list)
    outcomes: list[DocumentOutcome] = Field(default_factory=list)  # one per input, in order
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    index_seconds: float = 0.0  # of ``seconds``, building the search index at the end
    # of ``unchanged``: items their source said were unchanged (an HTTP 304, a file of the
    # same size and mtime), so their stored copy was used: nothing fetched or parsed
    not_modified: int = 0
    removed: list[str] = Field(default_factory=list)  # URIs ``prune`` removed (gone)
    warnings: list[str] = Field(default_factory=list)  # what the run could not do, and why

    @classmethod
    def combined(cls, reports: list[IngestReport]) -> IngestReport:
        """One report for runs made one after another (counts summed, lists joined)."""
        data: dict[str, Any] = {}
        for report in reports:
            for name, value in report:
                if isinstance(value, list):
                    data[name] = data.get(name, []) + value
                elif isinstance(value, dict):
                    counts = data.setdefault(name, {})
                    for key, count in value.items():
                        counts[key] = counts.get(key, 0) + count
                elif isinstance(value, Usage):
                    usage = data.get(name, {})
                    data[name] = {k: usage.get(k, 0) + v for k, v in value}
                else:
                    data[name] = data.get(name, 0) + value
        return cls.model_validate(data)

    # -- what happened to each input (counts and outcomes kept together) ---------------
    def record_failed(self, failure: FailedDocument) -> None:
        if failure.skipped is not None:
            self.skipped[failure.skipped] = self.skipped.get(failure.skipped, 0) + 1
            self.skipped_files.append(failure)
            if failure.skipped == TOO_LARGE:
                self.warnings.append(f"skipped {failure.error}")
            return
        self.failed.append(failure)
        self.outcomes.append(
            DocumentOutcome(input=failure.uri, outcome="failed", error=failure.error)
        )

    def record_duplicate(self, skipped: SkippedDocument) -> None:
        self.duplicates.append(skipped)
        self.outcomes.append(
            DocumentOutcome(
                input=skipped.uri,
                outcome="duplicate",
                document_id=skipped.document_id,
                error=skipped.reason,
            )
        )

    def record_unchanged(self, document_id: str, uri: str) -> None:
        self.unchanged += 1
        self.document_ids.append(document_id)
        self.outcomes.append(
            DocumentOutcome(input=uri, outcome="unchanged", document_id=document_id)
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def llm_calls_per_chunk(self) -> float:
        """LLM calls made per chunk written (questions and qualifying text together)."""
        return round(self.usage.calls / self.chunks, 3) if self.chunks else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cost_per_million_document_tokens(self) -> float | None:
        if not self.document_tokens:
            return None
        return round(self.usage.cost_usd * 1_000_000 / self.document_tokens, 4)

    def record_stored(
        self,
        document_id: str,
        uri: str,
        *,
        changed: bool,
        chunks: int,
        matching_texts: int,
        document_tokens: int = 0,
    ) -> None:
        self.document_tokens += document_tokens
        if changed:
            self.changed += 1
        else:
            self.added += 1
        self.document_ids.append(document_id)
        self.chunks += chunks
        self.matching_texts += matching_texts
        self.outcomes.append(
            DocumentOutcome(
                input=uri,
                outcome="changed" if changed else "added",
                document_id=document_id,
                chunks=chunks,
                matching_texts=matching_texts,
            )
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def documents(self) -> int:
        """Documents written by this run (added or changed)."""
        return self.added + self.changed

    def progress(self, seconds: float) -> IngestProgress:
        """Where the run stands, ``seconds`` after it started."""
        return IngestProgress(
            planned=self.planned,
            processed=self.processed,
            added=self.added,
            changed=self.changed,
            unchanged=self.unchanged,
            failed=len(self.failed),
            skipped=len(self.skipped_files),
            chunks=self.chunks,
            matching_texts=self.matching_texts,
            llm_calls=self.usage.calls,
            seconds=round(seconds, 1),
        )

    @property
    def processed(self) -> int:
        done = self.documents + self.unchanged + len(self.duplicates) + len(self.failed)
        return done + len(self.skipped_files)

    def outcome(self, label: str, document_id: str | None = None) -> DocumentOutcome:
        """The outcome of a one-document run, under ``label``; one rule for every interface.

        ``document_id`` names the document when the run cannot (a record given its id).
        """
        if len(self.outcomes) == 1:
            one = self.outcomes[0]
            return one.model_copy(
                update={"input": label, "document_id": one.document_id or document_id}
            )
        if self.failed:
            error = "; ".join(f.error for f in self.failed)
            return DocumentOutcome(input=label, outcome="failed", error=error)
        if self.duplicates:
            reason = self.duplicates[0].reason
            return DocumentOutcome(input=label, outcome="duplicate", error=reason)
        kind: Outcome
        if self.added:
            kind = "added"
        elif self.changed:
            kind = "changed"
        elif self.unchanged:
            kind = "unchanged"
        else:
            return DocumentOutcome(input=label, outcome="failed", error="nothing was ingested")
        return DocumentOutcome(
            input=label,
            outcome=kind,
            document_id=self.document_ids[0] if self.document_ids else document_id,
            chunks=self.chunks,
            matching_texts=self.matching_texts,
        )
