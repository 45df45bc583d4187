"""Ctrl-C or SIGTERM during a long run (``ingest``, ``reindex``, ``sync``): the run stops where it
is and says what it stored, what the next run finishes, and what it spent, then exits
130. Without this a stopped run printed nothing, not even the LLM calls already paid.

Nothing is lost by stopping: a document whose write had begun keeps its committed
version visible, and the next run repairs it (``DocumentRegistry.repair``)."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

import typer
from pydantic import BaseModel, Field
from rich.console import Console

import flexmatch as fm

if TYPE_CHECKING:
    from flexmatch import IngestReport

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C


class Interrupted(BaseModel):
    """What a stopped run leaves: ``--json`` prints this instead of the report."""

    interrupted: bool = True
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    failed: int = 0
    pending: list[str] = Field(
        default_factory=list, description="Documents left mid-write: the next run repairs them."
    )
    not_reached: int = Field(0, description="Documents found but not begun.")
    usage: fm.Usage = Field(default_factory=fm.Usage, description="LLM use until the stop.")


class RunWatch:
    """Follows a run from the outside (its progress reports, the LLM's usage counter), so
    what it did is known even when it never returns."""

    def __init__(self, base: fm.KnowledgeBase, tenant: str) -> None:
        self.base = base
        self.tenant = tenant
        self.report: IngestReport | None = None
        self.finished: list[IngestReport] = []  # runs of the same command done before it
        self._usage_before = self._usage()
        self.unlisted: str | None = None  # why the pending documents could not be listed

    def seen(self, report: IngestReport) -> None:
        self.report = report

    def finish(self, report: IngestReport) -> None:
        """One run of several (a sync's sources) is done; the next one is followed."""
        self.finished.append(report)
        self.report = None

    def _usage(self) -> fm.Usage:
        llm = self.base.llm
        return llm.usage.model_copy() if llm is not None else fm.Usage()

    def summary(self) -> Interrupted:
        current = [self.report] if self.report is not None else []
        report = fm.IngestReport.combined([*self.finished, *current])
        try:
            pending = [
                record.uri or record.id
                for record in self.base.list_documents(tenant=self.tenant)
                if record.pending_version is not None or record.status == "pending"
            ]
        except fm.FlexMatchError as exc:  # the stopped run's thread still holds the store
            self.unlisted = str(exc)
            pending = []
        left = report.planned - report.processed - len(pending)
        return Interrupted(
            added=report.added,
            changed=report.changed,
            unchanged=report.unchanged,
            failed=len(report.failed),
            pending=pending,
            not_reached=max(left, 0),
            usage=self._usage() - self._usage_before,  # calls still in flight not counted
        )


def _as_interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C: whoever handles Ctrl-C now (the event loop) stops. A process
    started with SIGINT ignored (``cmd &`` in a script) still stops, as Ctrl-C would."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        raise KeyboardInterrupt
    signal.raise_signal(signal.SIGINT)


@contextlib.contextmanager
def stopped_cleanly(
    watch: RunWatch, errors: Console, as_json: bool, indent: int | None = 2
) -> Iterator[None]:
    """Run the block with SIGTERM taken as Ctrl-C (a service manager's stop, ``kill``);
    when either stops it, print what was done (as JSON indented by ``indent``; ``None``:
    one line) and exit 130."""
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if in_main else None
    if in_main:
        signal.signal(signal.SIGTERM, _as_interrupt)
    try:
        yield
    except KeyboardInterrupt:
        # work cut off on the way out (an ingest thread's loop, a task collected at exit)
        # is no news: asyncio must not print its tracebacks after the summary
        logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
        summary = watch.summary()
        if as_json:
            sys.stdout.write(summary.model_dump_json(indent=indent) + "\n")
        else:
            say(summary, errors)
        if watch.unlisted is not None:
            errors.print(f"Pending documents not counted: {watch.unlisted}", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def say(summary: Interrupted, errors: Console) -> None:
    usage = summary.usage
    errors.print(
        f"[yellow]Interrupted.[/] Stored {summary.added + summary.changed} documents "
        f"({summary.added} new, {summary.changed} changed; {summary.unchanged} unchanged, "
        f"{summary.failed} failed)."
    )
    errors.print(
        f"Pending: {len(summary.pending)} left mid-write (their last committed version "
        f"stays searchable), {summary.not_reached} not reached; run the same command again "
        "to repair and finish them."
    )
    errors.print(
        f"Spent: {usage.calls} LLM calls ({usage.cached_calls} from cache), "
        f"{usage.prompt_tokens + usage.completion_tokens} tokens, ${usage.cost_usd:.4f}"
    )
