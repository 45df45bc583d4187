"""What an ingest sends: its inputs sorted into URLs and files (folders walked as an
embedded ingest walks them), files grouped into uploads the server accepts, and the
report's uploads named again by the paths they were read from."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from flexmatch.client.connection import is_url
from flexmatch.models import FailedDocument, IngestReport

T = TypeVar("T")

# what one request carries at most: the server's defaults (Limits) leave room above these
BATCH_BYTES = 32 * 1024 * 1024
BATCH_FILES = 100
BATCH_URLS = 100
BATCH_RECORDS = 1_000


def sorted_inputs(inputs: Iterable[str | Path]) -> tuple[list[str], list[Path], IngestReport]:
    """The URLs and the files among ``inputs`` (folders walked), and a report of those
    that cannot be read: a path that is missing or a symlink fails alone, here, as it
    does in an embedded ingest."""
    urls: list[str] = []
    paths: list[Path] = []
    local = IngestReport()
    for given in inputs:
        text = str(given)
        if isinstance(given, str) and is_url(text):
            urls.append(text)
            continue
        path = Path(given).expanduser()
        if path.is_symlink():
            local.record_failed(
                FailedDocument(uri=text, error=f"{text}: symlinks are not followed")
            )
        elif path.is_file():
            paths.append(path)
        elif path.is_dir():
            paths.extend(walk(path))
        else:
            error = f"{text}: no such file or folder"
            local.record_failed(FailedDocument(uri=text, error=error))
    return urls, paths, local


def chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def walk(folder: Path) -> Iterator[Path]:
    """A folder's files as an embedded ingest walks them: sorted, no hidden entries,
    no symlinks."""
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        if entry.is_dir():
            yield from walk(entry)
        elif entry.is_file():
            yield entry


def file_batches(
    paths: list[Path],
) -> Iterator[tuple[list[tuple[str, Path]], list[FailedDocument]]]:
    """Files grouped into uploads of at most ``BATCH_FILES`` files and ``BATCH_BYTES``
    (a larger file goes alone). The server names an upload by its file name, so a second
    file of the same name in one ingest would replace the first: it fails alone instead."""
    names: dict[str, Path] = {}
    batch: list[tuple[str, Path]] = []
    size = 0
    for path in paths:
        failed: list[FailedDocument] = []
        name = path.name
        if name in names:
            error = (
                f"{path}: another file of this ingest is also named '{name}' ({names[name]}); "
                "the server names an upload by its file name: ingest it on its own or rename it"
            )
            yield [], [FailedDocument(uri=str(path), error=error)]
            continue
        names[name] = path
        try:
            length = path.stat().st_size
        except OSError as exc:
            failed.append(FailedDocument(uri=str(path), error=f"{path}: {exc.strerror}"))
            yield [], failed
            continue
        if batch and (len(batch) >= BATCH_FILES or size + length > BATCH_BYTES):
            yield batch, []
            batch, size = [], 0
        batch.append((name, path))
        size += length
    if batch:
        yield batch, []


def relabelled(report: IngestReport, paths: dict[str, str]) -> IngestReport:
    """The report with each uploaded file named by the path it was read from, as an
    embedded ingest names it (the server knows only the file name)."""
    for outcome in report.outcomes:
        outcome.input = paths.get(outcome.input, outcome.input)
    for failure in report.failed:
        failure.uri = paths.get(failure.uri, failure.uri)
    for skipped in report.duplicates:
        skipped.uri = paths.get(skipped.uri, skipped.uri)
    return report
