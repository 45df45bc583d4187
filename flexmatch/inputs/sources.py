"""Sources: a source's inputs (paths, URLs, records) → documents, by the source's type."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flexmatch.config import IngestConfig, SourceConfig
from flexmatch.inputs.loaders import Item, LoadTask, attempt, discover, document_id, load
from flexmatch.inputs.records import entries_in_file, load_template, record_documents
from flexmatch.inputs.web import WebPolicy, fetch, parse_page
from flexmatch.models import Document, Element, FailedDocument

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
        self, name: str, config: SourceConfig, kb_dir: Path | None, limits: IngestConfig
    ) -> None:
        self.name = name
        self.config = config
        self.kb_dir = kb_dir
        self.limits = limits

    def plan(self, inputs: Iterable[str | Path]) -> Plan:
        """Split inputs into URLs and files (a web source with no inputs takes its ``urls``)."""
        given = [str(i) for i in inputs]
        if not given and self.config.type == "web":
            given = list(self.config.urls)
        urls = [i for i in given if is_url(i)]
        paths = [Path(i).expanduser() for i in given if not is_url(i)]
        tasks, missing = discover(paths, self.config.include, self.config.exclude)
        return Plan(urls=urls, tasks=tasks, failed=list(missing))

    def read(self, plan: Plan) -> Iterator[Item]:
        yield from plan.failed
        for url in plan.urls:
            yield self.read_url(url)
        if self.config.type == "records":
            template = load_template(self.config, self.kb_dir)
            for task in plan.tasks:
                yield from record_documents(
                    entries_in_file(task.path), self.name, self.config, template
                )
            return
        for task in plan.tasks:
            yield from load(task, self.name, self.limits.max_document_bytes)

    def read_urls(self, urls: list[str]) -> Iterator[Item]:
        for url in urls:
            yield self.read_url(url)

    def read_url(self, url: str) -> Item:
        policy = WebPolicy(
            allow_hosts=frozenset(h.lower() for h in self.config.allow_hosts),
            timeout=self.config.timeout,
            max_redirects=self.config.max_redirects,
            max_bytes=self.limits.max_document_bytes,
        )

        def build() -> Document:
            page = fetch(url, policy)
            parsed = parse_page(page)
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
    ) -> Item:
        """A file received as bytes (an HTTP upload); its name picks the parser."""
        name = Path(filename).name
        if name in ("", ".", ".."):
            name = "upload"
        uri = f"upload:{name}"
        if len(data) > self.limits.max_document_bytes:
            return FailedDocument(
                uri=uri,
                error=(
                    f"{name}: the file is {len(data):,} bytes, over the "
                    f"{self.limits.max_document_bytes:,}-byte cap (ingest.max_document_bytes)"
                ),
            )
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            path.write_bytes(data)
            items = list(load(LoadTask(path), self.name, self.limits.max_document_bytes))
        if len(items) != 1 or isinstance(items[0], FailedDocument):
            errors = "; ".join(i.error for i in items if isinstance(i, FailedDocument))
            return FailedDocument(uri=uri, error=errors.replace(folder + "/", "") or name)
        document = items[0]
        return document.model_copy(
            update={
                "id": given_id or document_id(self.name, uri),
                "uri": uri,
                "metadata": {**document.metadata, **(metadata or {})},
            }
        )

    def records(self, records: Iterable[Any]) -> Iterator[Item]:
        """Records handed over in code (e.g. facts an agent extracted)."""
        template = load_template(self.config, self.kb_dir)
        entries = ((None, record, f"record:{i}") for i, record in enumerate(records))
        yield from record_documents(entries, self.name, self.config, template)
