"""Loading: paths → documents. Files and folders (recursive, hidden files and symlinks
skipped) and JSON Lines corpora (one document per line, its id kept).

A folder walk takes what it finds: a file no parser reads (an unsupported type, a binary
blob in a text format), one whose text is no prose (PostScript, a symbol table, minified
code: named by that reason), one over the byte cap or one without text is *skipped*,
counted by reason, not failed, and a subfolder that cannot be read is one failure while
the walk goes on. A file named on its own is meant: if it cannot be read, that is a failure.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from flexmatch.access import ACCESS_FIELD
from flexmatch.errors import (
    DocumentTooLargeError,
    EmptyDocumentError,
    NotProseError,
    ParseError,
    UnsupportedFormatError,
)
from flexmatch.inputs.parsing import parse_file, parse_text, skip_reason
from flexmatch.inputs.sources.items import SeenIds, attempt, document_id, given_id, json_lines
from flexmatch.models import TOO_LARGE, Document, Element, FailedDocument, ParsedDocument


@dataclass(frozen=True)
class LoadTask:
    """One file to load; a JSON Lines file yields many documents. ``root`` is the folder
    a walk found it in (its documents keep their ``path`` inside it)."""

    path: Path
    root: Path | None = None

    @property
    def is_corpus(self) -> bool:
        return self.path.suffix.lower() == ".jsonl"

    def count(self) -> int:
        if not self.is_corpus:
            return 1
        with self.path.open("rb") as handle:
            return sum(1 for line in handle if line.strip())


def resolved_paths(kb_dir: Path, paths: list[str]) -> list[Path]:
    """``paths`` as a source reads them: ``~`` expanded, relative ones under ``kb_dir``."""
    joined = (kb_dir / Path(p).expanduser() for p in paths)
    return [Path(os.path.normpath(path)) for path in joined]  # no symlink followed


def discover(
    paths: list[Path],
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    empty: list[Path] | None = None,
) -> tuple[list[LoadTask], list[FailedDocument]]:
    """Every file under ``paths``, in a stable order; missing paths are reported.

    ``include``/``exclude`` globs filter what a folder walk finds (matched against the
    path relative to the folder, and against the file name); named files are always taken.
    ``empty`` gets every folder walked that holds no file at all, at any depth (an
    emptied folder, or a share not mounted on its mount point).
    """
    tasks: list[LoadTask] = []
    missing: list[FailedDocument] = []
    for path in paths:
        if path.is_symlink():
            missing.append(
                FailedDocument(uri=str(path), error=f"{path}: symlinks are not followed")
            )
        elif path.is_file():
            tasks.append(LoadTask(path))
        elif path.is_dir():
            for found in _walk(path, empty):
                if isinstance(found, FailedDocument):
                    missing.append(found)
                elif selected(found.relative_to(path), include or [], exclude or []):
                    tasks.append(LoadTask(found, root=path))
        else:
            missing.append(FailedDocument(uri=str(path), error=f"{path}: {_not_loadable(path)}"))
    return tasks, missing


_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_loadable(path: Path) -> str:
    """Why a named path that is neither a file nor a folder is refused: a FIFO or a device
    exists (reading one would block or never end), so "no such file" would mislead."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file or folder"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or type(exc).__name__})"
    kind = next((name for test, name in _SPECIAL_FILES if test(mode)), "a special file")
    return f"not a regular file: {kind}"


def selected(relative: Path, include: list[str], exclude: list[str]) -> bool:
    def matches(pattern: str) -> bool:
        return (
            relative.match(pattern)
            or fnmatch(relative.name, pattern)
            or fnmatch(relative.as_posix(), pattern)
        )

    if include and not any(matches(p) for p in include):
        return False
    return not any(matches(p) for p in exclude)


def _walk(folder: Path, empty: list[Path] | None = None) -> Iterator[Path | FailedDocument]:
    """The files under ``folder``; a subfolder that cannot be listed is a failure naming
    it, and the walk goes on. Folders that hold no file at any depth go in ``empty``."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        yield FailedDocument(uri=str(folder), error=f"{folder}: folder not read ({why})")
        return
    files = 0
    for found in _entries(folder, entries, empty):
        files += isinstance(found, Path)
        yield found
    if not files and empty is not None:
        empty.append(folder)


def _entries(
    folder: Path, entries: list[Path], empty: list[Path] | None
) -> Iterator[Path | FailedDocument]:
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            mode = entry.lstat().st_mode
        except OSError as exc:  # gone meanwhile, or a path too long to name
            why = exc.strerror or type(exc).__name__
            yield FailedDocument(uri=str(entry), error=f"{entry}: not read ({why})")
            continue
        if stat.S_ISDIR(mode):
            yield from _walk(entry, empty)
        elif stat.S_ISREG(mode):
            yield entry


Parse = Callable[[Path], ParsedDocument]


def load(
    task: LoadTask,
    source: str,
    max_bytes: int,
    parse: Parse | None = None,
    parsers: Mapping[str, str] | None = None,
) -> Iterator[Document | FailedDocument]:
    """The documents in one file, or a failure naming it; ``parse`` reads one file (in a
    worker process, when the caller isolates parsing). A file a folder walk found is
    skipped (a ``FailedDocument`` with its ``skipped`` reason) when no parser reads it or
    it holds no text; ``parsers`` is the ``ingest.parsers`` setting (``parse`` applies it
    when given: the default reads the file here, under both)."""
    if parse is None:
        parse = functools.partial(parse_file, max_bytes=max_bytes, parsers=parsers)
    if task.is_corpus:
        yield from _load_corpus(task.path, source)
        return
    uri = str(task.path.resolve())
    walked = task.root is not None
    if walked:
        try:
            reason = skip_reason(task.path, parsers)
        except OSError as exc:
            error = f"{task.path}: could not read file: {exc.strerror or exc}"
            yield FailedDocument(uri=uri, error=error)
            return
        if reason is not None:
            yield FailedDocument(uri=uri, error=_skip_detail(task.path, reason), skipped=reason)
            return
    refused: list[str] = []  # why the parser passed over a walked file

    def build() -> Document:
        try:
            check_file_size(task.path, max_bytes)
            parsed = parse(task.path)
        except NotProseError as exc:
            refused.append(exc.reason)
            raise
        except UnsupportedFormatError:
            refused.append("unsupported type")
            raise
        except EmptyDocumentError:
            refused.append("empty")
            raise
        except DocumentTooLargeError:
            refused.append(TOO_LARGE)
            raise
        return Document(
            id=document_id(source, uri),
            uri=uri,
            source=source,
            title=parsed.title or task.path.stem,
            elements=parsed.elements,
            metadata={
                **without_access(parsed.metadata),
                "file_name": task.path.name,
                **_place(task),
            },
        )

    item = attempt(uri, build)
    if walked and refused and isinstance(item, FailedDocument):
        item = item.model_copy(update={"skipped": refused[0]})
    yield item


def _skip_detail(path: Path, reason: str) -> str:
    if reason == "unsupported type":
        return f"{path}: unsupported file type '{path.suffix.lower() or '(none)'}'"
    if reason == "binary file":
        return f"{path}: binary content, not the text a '{path.suffix}' file holds"
    return f"{path}: no text (the file is empty)"


NAMING_METADATA = frozenset({"path"})
"""Metadata that depends on how a file was named (its place in the folder that was
walked, none when named on its own), not on the file: it never enters a document's
version, so one file reached by either route is one unchanged document."""


def without_access(metadata: dict[str, Any]) -> dict[str, Any]:
    """A parser's metadata without ``access``: a file's content never says who may read it
    (front matter or a field of it would let a writer open a document up)."""
    return {k: v for k, v in metadata.items() if k != ACCESS_FIELD}


def _place(task: LoadTask) -> dict[str, str]:
    """``path``: where a walked file sits in the folder that was ingested (``src/app.py``),
    the place a reader knows it by; a file named on its own has its ``file_name`` only."""
    if task.root is None:
        return {}
    return {"path": task.path.relative_to(task.root).as_posix()}


def check_file_size(path: Path, max_bytes: int) -> None:
    """Refuse a file over the byte cap before reading it."""
    size = path.stat().st_size
    if size > max_bytes:
        raise DocumentTooLargeError(
            f"{path}: the file is {size:,} bytes, over the {max_bytes:,}-byte cap "
            "(ingest.max_document_bytes)"
        )


def _load_corpus(path: Path, source: str) -> Iterator[Document | FailedDocument]:
    """JSON Lines: ``_id`` or ``id``, ``title``, ``text``; other fields become metadata.
    Ids are unique within the file: a repeated one fails its row, naming the first."""
    seen = SeenIds()
    for entry in json_lines(path):
        if isinstance(entry, FailedDocument):
            yield entry
            continue
        record, where = entry
        item = attempt(where, functools.partial(_corpus_document, record, where, source))
        yield seen.claim(item, where)


def _corpus_document(record: Any, where: str, source: str) -> Document:
    if not isinstance(record, dict):
        raise ParseError(f"{where}: expected a JSON object")
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ParseError(f"{where}: field 'text' is missing or empty")
    title = str(record.get("title") or "")
    field = "_id" if "_id" in record else "id"
    given = given_id(record.get(field), where, field)
    uri = f"{where.rsplit(':', 1)[0]}#{given}" if given is not None else where
    parsed = parse_text(text, title=title)
    elements = parsed.elements
    if title:
        elements = [Element(kind="title", text=title), *elements]
    # ``access`` never comes from a file's content (see docs/security.md, Access control)
    left_out = ("_id", "id", "title", "text", ACCESS_FIELD)
    metadata = {k: v for k, v in record.items() if k not in left_out}
    return Document(
        id=given if given is not None else document_id(source, uri),
        uri=uri,
        source=source,
        title=title,
        elements=elements,
        metadata=metadata,
    )
