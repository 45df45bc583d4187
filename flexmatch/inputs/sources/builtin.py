"""The built-in source types: ``files``, ``records`` and ``web``.

They register through the ``flexmatch.sources`` entry points like any plug-in. An
http(s) URL given to any of them is a web page (fetched under the source's web rules);
a web source's paths are read as files, as they always were.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from flexmatch.errors import WebImportError
from flexmatch.inputs.sources.crawl import Crawler
from flexmatch.inputs.sources.fetch import VALIDATORS, conditional_headers
from flexmatch.inputs.sources.files import LoadTask, discover, load, resolved_paths
from flexmatch.inputs.sources.items import Item, attempt
from flexmatch.inputs.sources.pages import page_document, parse_page
from flexmatch.inputs.sources.records import entries_in_file, load_template, record_documents
from flexmatch.inputs.sources.types import ItemRef, SourceContext, SourceType, WebPage
from flexmatch.inputs.sources.validators import read_version
from flexmatch.models import Document, FailedDocument
from flexmatch.templates import PromptTemplate

# a file modified this recently may change again within the clock's resolution without
# its mtime moving: its version is not trusted (read again next time), like git's index
RACY_SECONDS = 2.0
GONE = (404, 410)


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(text: str) -> bool:
    """``scheme://...``: handed to web import, which refuses anything but http(s)."""
    return bool(_SCHEME.match(text))


def page_ref(context: SourceContext, url: str) -> ItemRef:
    return ItemRef(id=context.document_id(url), uri=url, data=WebPage(url))


def read_page(context: SourceContext, ref: ItemRef) -> Item:
    """One web page; when a copy is stored, asked for conditionally (ETag,
    Last-Modified): a 304 Not Modified reuses the copy, nothing is parsed."""
    url = ref.data.url if isinstance(ref.data, WebPage) else ref.uri

    def build() -> Document:
        stored = context.stored.metadata(ref.id) or {}
        headers = conditional_headers(stored)
        page = context.fetch_page(url, headers or None)
        if page.status == 304 and headers:
            validators: dict[str, Any] = {k: stored[k] for k in VALIDATORS if k in stored}
            reused = context.reuse(ref.id, validators)
            if reused is not None:
                return reused
            page = context.fetch_page(url)  # the stored copy is gone: fetch it whole
        if page.status in GONE:
            context.log.gone.add(ref.id)
        if not 200 <= page.status < 300:
            raise WebImportError(f"{page.url}: HTTP {page.status}")
        parsed = context.parse(parse_page, page, label=url)
        return page_document(parsed, document_id=ref.id, uri=url, source=context.name)

    return attempt(url, build)


def file_version(task: LoadTask) -> str | None:
    """Size, modification time and place in the folder walked (its documents keep it),
    the hint that a file is unchanged (None: just modified, or unreadable)."""
    try:
        status = task.path.stat()
    except OSError:
        return None
    if time.time() - status.st_mtime < RACY_SECONDS:
        return None
    place = task.path.relative_to(task.root).as_posix() if task.root else ""
    return read_version(f"{status.st_size}:{status.st_mtime_ns}:{place}")


def _split(inputs: list[str]) -> tuple[list[str], list[Path]]:
    return [i for i in inputs if is_url(i)], [Path(i).expanduser() for i in inputs if not is_url(i)]


def configured_paths(context: SourceContext) -> list[Path]:
    """The source's ``paths``: ``~`` expanded, relative ones under the knowledge base."""
    return resolved_paths(context.kb_dir or Path.cwd(), context.config.paths)


def _paths_unset(context: SourceContext) -> str | None:
    if context.config.paths:
        return None
    return f"nothing to list: set sources.{context.name}.paths"


def _discover(context: SourceContext, paths: list[Path]) -> tuple[list[LoadTask], list[Any]]:
    """``discover`` path by path, noting each one that lists no file at all, and every
    folder under one that holds no file (an emptied folder, or a share mounted anywhere
    below a configured path that is not mounted now: what is stored under it is not
    pruned)."""
    tasks: list[LoadTask] = []
    missing: list[Any] = []
    config = context.config
    for path in paths:
        empty: list[Path] = []
        found, failed = discover([path], config.include, config.exclude, empty)
        if not found and not failed and path not in empty:
            empty.append(path)
        context.log.empty.extend(folder for folder in empty if folder not in context.log.empty)
        tasks += found
        missing += failed
    return tasks, missing


def _steady(context: SourceContext, path: Path, items: Iterable[Item]) -> Iterator[Item]:
    """``items`` read from ``path``; a file that changed while it was read (a records
    file caught mid-rewrite: the records after the point it was cut at are missing from
    this read, not from the source) leaves the run incomplete, so nothing is pruned."""
    before = _fingerprint(path)
    yield from items
    if _fingerprint(path) != before:
        context.incomplete(f"{path} changed while it was read")


HASHED_UP_TO = 64 << 20  # bytes: a bigger file's rewrite outlasts a clock tick


def _fingerprint(path: Path) -> tuple[int, int, int, int, int, bytes] | None:
    """What tells a file's state: its inode, size, modification and change times, and,
    up to ``HASHED_UP_TO`` bytes, the hash of its content (a small file rewritten within
    one clock tick, to the same size, changes only that; a big one is not read twice
    more for it)."""
    try:
        status = path.stat()
        digest = hashlib.sha256()
        if status.st_size <= HASHED_UP_TO:
            with path.open("rb") as handle:
                while piece := handle.read(1 << 20):
                    digest.update(piece)
    except OSError:
        return None
    times = (status.st_mtime_ns, status.st_ctime_ns)
    return (status.st_dev, status.st_ino, status.st_size, *times, digest.digest())


def _file_refs(context: SourceContext, paths: list[Path], *, versions: bool) -> Iterator[Any]:
    """Files found under ``paths`` (missing ones as failures); a JSON Lines corpus is one
    item of many documents. A path or folder that could not be listed leaves the run
    incomplete: a file under it may still exist, so nothing is pruned."""
    tasks, missing = _discover(context, paths)
    for failure in missing:
        context.incomplete(f"not listed: {failure.error}")
        yield failure
    for task in tasks:
        if task.is_corpus or not versions:
            yield ItemRef(id=str(task.path), uri=str(task.path), data=task, count=task.count())
            continue
        uri = str(task.path.resolve())
        yield ItemRef(id=context.document_id(uri), uri=uri, version=file_version(task), data=task)


def _load_file(context: SourceContext, task: LoadTask) -> Iterable[Item]:
    limit = context.limits.max_document_bytes
    items = load(task, context.name, limit, context.parse_file, context.limits.parsers)
    return _steady(context, task.path, items) if task.is_corpus else items


class FilesSource(SourceType):
    """Files and folders (``include``/``exclude`` globs on folder walks), JSON Lines
    corpora, and http(s) URLs given as inputs."""

    def lists_whole_source(self) -> bool:
        return bool(self.context.config.paths)

    def unlisted(self) -> str | None:
        return _paths_unset(self.context)

    def scope(self) -> list[Path] | None:
        return configured_paths(self.context)

    def list_items(self, inputs: list[str]) -> Iterable[ItemRef | Item]:
        urls, paths = _split(inputs) if inputs else ([], configured_paths(self.context))
        yield from (page_ref(self.context, url) for url in urls)
        yield from _file_refs(self.context, paths, versions=True)

    def fetch(self, ref: ItemRef) -> Iterable[Item]:
        return _load_file(self.context, ref.data)


class RecordsSource(SourceType):
    """JSON objects, JSON Lines or a JSON key/value file, each entry rendered to text by
    the source's ``template``."""

    @cached_property
    def template(self) -> PromptTemplate:
        return load_template(self.context.config, self.context.kb_dir)

    def list_items(self, inputs: list[str]) -> Iterable[ItemRef | Item]:
        self.template  # noqa: B018  (a missing or broken template is a config error: now)
        urls, paths = _split(inputs) if inputs else ([], configured_paths(self.context))
        yield from (page_ref(self.context, url) for url in urls)
        yield from _file_refs(self.context, paths, versions=False)

    def lists_whole_source(self) -> bool:
        return bool(self.context.config.paths)

    def unlisted(self) -> str | None:
        return _paths_unset(self.context)

    def scope(self) -> list[Path] | None:
        return configured_paths(self.context)

    def fetch(self, ref: ItemRef) -> Iterable[Item]:
        path = ref.data.path
        entries = entries_in_file(path)
        documents = record_documents(entries, self.context.name, self.context.config, self.template)
        return _steady(self.context, path, documents)

    def records(self, records: Iterable[Any], first: int = 0) -> Iterator[Item]:
        """Records handed over in code; ``first`` numbers them (``record:N``)."""
        entries = ((None, record, f"record:{i}") for i, record in enumerate(records, first))
        context = self.context
        yield from record_documents(entries, context.name, context.config, self.template)


class WebSource(SourceType):
    """Web pages by URL (the source's ``urls`` when none are given); with ``crawl``, the
    sites they start, link by link. Its listing is the whole source: ``--prune`` works."""

    prunable = True

    @property
    def streams(self) -> bool:
        return self.context.config.crawl is not None

    def expected(self) -> int:
        crawl = self.context.config.crawl
        return crawl.max_pages if crawl is not None else 0

    def unlisted(self) -> str | None:
        if self.context.config.urls:
            return None
        return f"nothing to list: set sources.{self.context.name}.urls"

    def list_items(self, inputs: list[str]) -> Iterable[ItemRef | Item]:
        urls, paths = _split(inputs or list(self.context.config.urls))
        if self.context.config.crawl is not None:
            yield from Crawler(self.context, urls).run()
        else:
            yield from (page_ref(self.context, url) for url in urls)
        yield from _file_refs(self.context, paths, versions=True)

    def fetch(self, ref: ItemRef) -> Item | Iterable[Item]:
        if isinstance(ref.data, Document | FailedDocument):  # a crawl read it as it listed it
            return ref.data
        return _load_file(self.context, ref.data)
