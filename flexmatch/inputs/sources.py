"""Sources: a source's inputs (paths, URLs, records) → documents, by the source's type."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flexmatch.config import IngestConfig, SourceConfig
from flexmatch.errors import WebImportError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.loaders import Item, LoadTask, attempt, discover, document_id, load
from flexmatch.inputs.parsing import parse_file
from flexmatch.inputs.records import entries_in_file, load_template, record_documents
from flexmatch.inputs.web import WebPolicy, fetch, parse_page
from flexmatch.models import Document, Element, FailedDocument, ParsedDocument

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_FILENAME_BYTES = 200


def safe_filename(filename: str) -> str:
    """A client-sent file name made safe to store and show: its last path part, without
    control characters, at most 200 bytes (its suffix kept)."""
    name = _CONTROL.sub("", filename.replace("\\", "/").rsplit("/", 1)[-1]).strip()
    if name in ("", ".", ".."):
        return "upload"
    if len(name.encode("utf-8")) > MAX_FILENAME_BYTES:
        stem, dot, suffix = name.rpartition(".")
        suffix = f".{suffix[:16]}" if dot and stem else ""
        budget = MAX_FILENAME_BYTES - len(suffix.encode("utf-8"))
        name = name[: len(name) - len(suffix)].encode("utf-8")[:budget].decode("utf-8", "ignore")
        name += suffix
    return name


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(text: str) -> bool:
    """``scheme://...``: handed to web import, which refuses anything but http(s)."""
    return bool(_SCHEME.match(text))


@dataclass
class Plan:
    """What a run will read: URLs, files, and inputs already known to fail."""

    urls: list[str] = field(default_factory=list)
    tasks: list[LoadTask] = field(default_factory=list)
    failed: list[Item] = field(default_factory=list)

    @property
    def total(self) -> int:
        """How many documents the plan yields (a JSON Lines file counts its lines)."""
        return len(self.failed) + len(self.urls) + sum(task.count() for task in self.tasks)


class SourceReader:
    """Reads the inputs of one named source into documents."""

    def __init__(
        self,
        name: str,
        config: SourceConfig,
        kb_dir: Path | None,
        limits: IngestConfig,
        workers: IsolatedPool | None = None,
        fetchers: IsolatedPool | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.kb_dir = kb_dir
        self.limits = limits
        self.workers = workers  # parse in these processes (else in this one)
        self.fetchers = fetchers  # fetch web pages in these processes

    def _parse_file(self, path: Path) -> ParsedDocument:
        if self.workers is None:
            return parse_file(path)
        return self.workers.run(parse_file, path, label=str(path))

    def _load(self, task: LoadTask) -> Iterator[Item]:
        return load(task, self.name, self.limits.max_document_bytes, self._parse_file)

    def plan(self, inputs: Iterable[str | Path]) -> Plan:
        """Split inputs into URLs and files (a web source with no inputs takes its ``urls``)."""
        given = [str(i) for i in inputs]
        if not given and self.config.type == "web":
            given = list(self.config.urls)
        urls = [i for i in given if is_url(i)]
        paths = [Path(i).expanduser() for i in given if not is_url(i)]
        tasks, missing = discover(paths, self.config.include, self.config.exclude)
        return Plan(urls=urls, tasks=tasks, failed=list(missing))

    def read(self, plan: Plan, *, urls: bool = True) -> Iterator[Item]:
        """The plan's documents; ``urls=False`` leaves out its URLs (read them first with
        ``read_url``, so no store or lock is held while a slow server answers)."""
        yield from plan.failed
        for url in plan.urls if urls else []:
            yield self.read_url(url)
        if self.config.type == "records":
            template = load_template(self.config, self.kb_dir)
            for task in plan.tasks:
                yield from record_documents(
                    entries_in_file(task.path), self.name, self.config, template
                )
            return
        for task in plan.tasks:
            yield from self._load(task)

    def read_url(self, url: str) -> Item:
        policy = WebPolicy(
            allow_hosts=frozenset(h.lower() for h in self.config.allow_hosts),
            timeout=self.config.timeout,
            max_redirects=self.config.max_redirects,
            max_bytes=self.limits.max_document_bytes,
        )

        def build() -> Document:
            if self.fetchers is None:
                page = fetch(url, policy)
            else:  # the worker is killed at the deadline, however slowly the server sends
                page = self.fetchers.run(
                    fetch,
                    url,
                    policy,
                    label=url,
                    timeout=policy.timeout,
                    what="fetching",
                    setting="the source's timeout",
                    error=WebImportError,
                )
            if self.workers is None:
                parsed = parse_page(page)
            else:
                parsed = self.workers.run(parse_page, page, label=url)
            elements = parsed.elements
            if parsed.title and not any(e.kind == "title" for e in elements):
                elements = [Element(kind="title", text=parsed.title), *elements]
            return Document(
                id=document_id(self.name, url),
                uri=url,
                source=self.name,
                title=parsed.title or page.url,
                elements=elements,
                metadata=parsed.metadata,
            )

        return attempt(url, build)

    def upload(
        self,
        filename: str,
        data: bytes,
        given_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> list[Item]:
        """A file received as bytes (an HTTP upload); its name picks the parser. A JSON
        Lines corpus gives one document per line; a given id needs exactly one document."""
        name = safe_filename(filename)
        uri = f"upload:{name}"
        if len(data) > self.limits.max_document_bytes:
            error = (
                f"{name}: the file is {len(data):,} bytes, over the "
                f"{self.limits.max_document_bytes:,}-byte cap (ingest.max_document_bytes)"
            )
            return [FailedDocument(uri=uri, error=error)]
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            path.write_bytes(data)
            items = list(self._load(LoadTask(path)))
        prefix = f"{folder}/"
        items = [
            FailedDocument(uri=uri, error=i.error.replace(prefix, ""))
            if isinstance(i, FailedDocument)
            else i
            for i in items
        ]
        if not items:
            return [FailedDocument(uri=uri, error=f"{name}: the file holds no document")]
        if given_id is not None and len(items) != 1:
            error = f"{name}: holds {len(items)} documents; replacing one needs one document"
            return [FailedDocument(uri=uri, error=error)]
        single = len(items) == 1
        return [
            item.model_copy(
                update={
                    "id": given_id or (document_id(self.name, uri) if single else item.id),
                    "uri": uri if single else f"{uri}#{item.id}",
                    "metadata": {**item.metadata, **(metadata or {})},
                    "original": data if single else None,  # kept to be downloaded again
                    "original_name": name if single else None,
                }
            )
            if isinstance(item, Document)
            else item
            for item in items
        ]

    def records(self, records: Iterable[Any], first: int = 0) -> Iterator[Item]:
        """Records handed over in code (e.g. facts an agent extracted); ``first`` is the
        index of the first one, for the names errors give them."""
        template = load_template(self.config, self.kb_dir)
        entries = ((None, record, f"record:{i}") for i, record in enumerate(records, first))
        yield from record_documents(entries, self.name, self.config, template)
