"""Sources: a source's inputs (paths, URLs, records) → documents, by the source's type."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from flexmatch.config import IngestConfig, SourceConfig
from flexmatch.errors import FlexMatchError
from flexmatch.loaders import LoadTask, discover, load
from flexmatch.loaders import document_id as loaders_document_id
from flexmatch.models import Document, Element, FailedDocument
from flexmatch.records import entries_in_file, load_template, record_documents
from flexmatch.web import WebPolicy, fetch, parse_page

Item = Document | FailedDocument


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(text: str) -> bool:
    """``scheme://...``: handed to web import, which refuses anything but http(s)."""
    return bool(_SCHEME.match(text))


class SourceReader:
    """Reads the inputs of one named source into documents."""

    def __init__(
        self, name: str, config: SourceConfig, kb_dir: Path | None, limits: IngestConfig
    ) -> None:
        self.name = name
        self.config = config
        self.kb_dir = kb_dir
        self.limits = limits

    def plan(self, inputs: Iterable[str | Path]) -> tuple[list[str], list[LoadTask], list[Item]]:
        """Split inputs into URLs and files (a web source with no inputs takes its ``urls``)."""
        given = [str(i) for i in inputs]
        if not given and self.config.type == "web":
            given = list(self.config.urls)
        urls = [i for i in given if is_url(i)]
        paths = [Path(i).expanduser() for i in given if not is_url(i)]
        tasks, missing = discover(paths, self.config.include, self.config.exclude)
        return urls, tasks, list(missing)

    def total(self, urls: list[str], tasks: list[LoadTask]) -> int:
        """How many documents the plan will yield (JSON files count as one)."""
        return len(urls) + sum(task.count() for task in tasks)

    def read(self, urls: list[str], tasks: list[LoadTask], failed: list[Item]) -> Iterator[Item]:
        yield from failed
        for url in urls:
            yield self.read_url(url)
        if self.config.type == "records":
            template = load_template(self.config, self.kb_dir)
            for task in tasks:
                yield from record_documents(
                    entries_in_file(task.path), self.name, self.config, template
                )
            return
        for task in tasks:
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
        try:
            page = fetch(url, policy)
            parsed = parse_page(page)
        except FlexMatchError as exc:
            return FailedDocument(uri=url, error=str(exc))
        except Exception as exc:  # a parser bug must not stop a bulk import
            return FailedDocument(uri=url, error=f"{url}: {type(exc).__name__}: {exc}")
        elements = parsed.elements
        if parsed.title and not any(e.kind == "title" for e in elements):
            elements = [Element(kind="title", text=parsed.title), *elements]
        return Document(
            id=loaders_document_id(self.name, url),
            uri=url,
            source=self.name,
            title=parsed.title or page.url,
            elements=elements,
            metadata=parsed.metadata,
        )

    def upload(
        self,
        filename: str,
        data: bytes,
        document_id: str | None = None,
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
                "id": document_id or loaders_document_id(self.name, uri),
                "uri": uri,
                "metadata": {**document.metadata, **(metadata or {})},
            }
        )

    def records(self, records: Iterable[Any]) -> Iterator[Item]:
        """Records handed over in code (e.g. facts an agent extracted)."""
        template = load_template(self.config, self.kb_dir)
        entries = ((None, record, f"record:{i}") for i, record in enumerate(records))
        yield from record_documents(entries, self.name, self.config, template)
