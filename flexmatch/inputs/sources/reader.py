"""The reader of one source: its type lists the items, the reader reads each (a stored
copy when its version hint says it is unchanged), keeping what the run reached."""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from flexmatch import deadlines
from flexmatch.config import CONFIG_FILE, IngestConfig, SourceConfig
from flexmatch.errors import FlexMatchError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.parsing import check_parsers
from flexmatch.inputs.sources.builtin import RecordsSource, page_ref, read_page
from flexmatch.inputs.sources.files import LoadTask, load
from flexmatch.inputs.sources.items import Item, document_id
from flexmatch.inputs.sources.types import (
    ItemRef,
    ReadLog,
    SourceContext,
    StoredCopies,
    WebPage,
    checked,
    listed,
    source_options,
    source_type,
)
from flexmatch.inputs.sources.validators import VERSION_KEY
from flexmatch.models import Document, FailedDocument

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_FILENAME_BYTES = 200


def safe_filename(filename: str) -> str:
    """A client-sent file name made safe to store and show: its last path part, without
    control characters, at most 200 bytes (its suffix kept). A longer name is cut and
    ends in a hash of the whole name (``~1a2b3c4d``), so two names that share their first
    200 bytes stay two documents."""
    name = filename.encode("utf-8", "replace").decode("utf-8")  # lone surrogates: "?"
    name = _CONTROL.sub("", name.replace("\\", "/").rsplit("/", 1)[-1]).strip()
    if name in ("", ".", ".."):
        return "upload"
    if len(name.encode("utf-8")) > MAX_FILENAME_BYTES:
        stem, dot, suffix = name.rpartition(".")
        suffix = f".{suffix[:16]}" if dot and stem else ""
        tag = "~" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
        budget = MAX_FILENAME_BYTES - len(suffix.encode("utf-8")) - len(tag)
        cut = name[: len(name) - len(suffix)].encode("utf-8")[:budget].decode("utf-8", "ignore")
        name = cut + tag + suffix
    return name


def spooled(items: Iterable[Item]) -> Iterator[Item]:
    """Read every item now, keep them in a temporary file (memory up to 32 MB, then
    disk), and give them back after: a crawl is done before the store is opened."""
    # closed by _unspooled, when the items are given back
    spool = tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024)  # noqa: SIM115
    try:
        for item in items:
            kind = b"d" if isinstance(item, Document) else b"f"
            spool.write(kind + item.model_dump_json().encode() + b"\n")
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return _unspooled(spool)


def _unspooled(spool: IO[bytes]) -> Iterator[Item]:
    with spool:
        for line in spool:
            model = Document if line[:1] == b"d" else FailedDocument
            yield model.model_validate_json(line[1:])


@dataclass
class Plan:
    """What a run will read: inputs already known to fail, single web pages (fetched
    concurrently, ahead of the run), the other items, and a listing that reads as it
    goes (a crawl: ``expected`` bounds it)."""

    failed: list[FailedDocument] = field(default_factory=list)
    pages: list[ItemRef] = field(default_factory=list)
    refs: list[ItemRef] = field(default_factory=list)
    stream: Iterable[ItemRef | Item] | None = None
    expected: int = 0

    @property
    def total(self) -> int:
        """How many documents the plan yields (a JSON Lines file counts its lines; a
        crawl, the most pages it may read)."""
        return len(self.failed) + len(self.pages) + sum(r.count for r in self.refs) + self.expected

    @property
    def urls(self) -> list[str]:
        """The single web pages' URLs."""
        return [ref.data.url for ref in self.pages]


# an item's ``data`` that is one page, or what its listing already read (a crawl's page):
# one document under the item's id, so a failure of it puts nothing else at risk
READ_AHEAD_DATA = (WebPage, Document, FailedDocument)


class SourceReader:
    """Reads the inputs of one named source into documents, through its source type."""

    def __init__(
        self,
        name: str,
        config: SourceConfig,
        kb_dir: Path | None,
        limits: IngestConfig,
        workers: IsolatedPool | None = None,
        fetchers: IsolatedPool | None = None,
        *,
        stored: StoredCopies | None = None,
        where: str = CONFIG_FILE,
    ) -> None:
        self.name = name
        self.config = config
        self.kb_dir = kb_dir
        self.limits = limits
        at = f"{where}: sources.{name}"
        cls = source_type(config.type, at)
        check_parsers(limits.parsers, f"{where}: ingest.parsers")
        self.context = SourceContext(
            name=name,
            config=config,
            options=source_options(cls, config, at),
            kb_dir=kb_dir,
            limits=limits,
            stored=stored or StoredCopies(),
            workers=workers,  # parse in these processes (else in this one)
            fetchers=fetchers,  # fetch web pages in these processes
        )
        self.source_type = cls(self.context)
        # a plug-in's fetch is bounded per item (time and documents); the built-ins bound
        # their own work (parse and fetch processes, byte caps)
        self.plugin = cls.__module__.split(".")[0] != "flexmatch"

    @property
    def log(self) -> ReadLog:
        """What this reader's runs reached (for ``--prune``) and found unchanged."""
        return self.context.log

    @property
    def prunable(self) -> bool:
        """A run without inputs lists the whole source (``prune`` may follow it)."""
        return self.source_type.lists_whole_source()

    @property
    def scope(self) -> list[Path] | None:
        """Where a run without inputs looks (None: everywhere the source's documents are)."""
        return self.source_type.scope()

    @property
    def unlisted(self) -> str | None:
        """Why a run without inputs would find nothing (None: it lists the source)."""
        return self.source_type.unlisted()

    def plan(self, inputs: Iterable[str | Path]) -> Plan:
        """The items ``inputs`` name (none: the source's own, e.g. a web source's urls)."""
        listed = self._listing([str(i) for i in inputs])
        if self.source_type.streams:
            return Plan(stream=listed, expected=self.source_type.expected())
        plan = Plan()
        for entry in listed:
            if isinstance(entry, ItemRef):
                (plan.pages if isinstance(entry.data, WebPage) else plan.refs).append(entry)
            elif isinstance(entry, FailedDocument):
                plan.failed.append(entry)
            else:  # a Document listed directly: wrapped, so every item is read alike
                plan.refs.append(ItemRef(id=entry.id, uri=entry.uri, data=entry))
        return plan

    def _listing(self, inputs: list[str]) -> Iterator[ItemRef | Item]:
        """The type's listing, each entry checked (``listed``: anything but an item or a
        document of this source is one failed input). A clear error (``FlexMatchError``)
        stops the run as it says; a plug-in that breaks while listing is reported as one
        failed input naming the source and its type (never a traceback), and the run
        counts as incomplete, so nothing is pruned after it."""
        try:
            for entry in self.source_type.list_items(inputs):
                yield listed(entry, self.context)
        except FlexMatchError:
            raise
        except Exception as exc:
            reason = f"listing the items of source '{self.name}' (type '{self.config.type}')"
            self.context.incomplete(f"{reason} failed")
            error = f"{reason} failed: {type(exc).__name__}: {exc}"
            yield FailedDocument(uri=f"source:{self.name}", error=error)

    def page_refs(self, urls: Iterable[str]) -> list[ItemRef]:
        """Web pages to import as such (anything that is not an http(s) URL fails)."""
        return [page_ref(self.context, url) for url in urls]

    def read(self, plan: Plan, *, urls: bool = True, stream: bool = True) -> Iterator[Item]:
        """The plan's documents; ``urls=False`` leaves out its single web pages (read them
        first with ``read_url``, concurrently, so no slow server holds the run),
        ``stream=False`` its streamed listing (a crawl: ``read_stream`` reads it)."""
        yield from plan.failed
        for ref in plan.pages if urls else []:
            yield from self.read_ref(ref)
        for ref in plan.refs:
            yield from self.read_ref(ref)
        if stream:
            yield from self.read_stream(plan)

    def read_stream(self, plan: Plan) -> Iterator[Item]:
        """The documents of the plan's streamed listing (none when it has none)."""
        for entry in plan.stream or ():
            if isinstance(entry, ItemRef):
                yield from self.read_ref(entry)
            else:
                if isinstance(entry, Document):
                    self.log.reach(entry.id, read=True)
                yield entry

    def read_url(self, url: str) -> Item:
        """One web page, under the source's web rules."""
        (item,) = self.read_ref(page_ref(self.context, url))
        return item

    def read_ref(self, ref: ItemRef) -> Iterator[Item]:
        """The documents of one item, as they are read: its stored copy when its version
        hint says it is unchanged, else what its type fetches (failures named, never
        raised)."""
        self.log.reach(ref.id)
        if isinstance(ref.data, WebPage):
            items: Iterable[Item] = [read_page(self.context, ref)]
        elif (unchanged := self._unchanged(ref)) is not None:
            items = [unchanged]
        else:
            items = (self._versioned(item, ref) for item in self._fetched(ref))
        for item in items:
            if isinstance(item, Document):
                self.log.reach(item.id, read=True)
            elif item.skipped is None and not isinstance(ref.data, READ_AHEAD_DATA):
                self._failed(ref)
            yield item

    def _failed(self, ref: ItemRef) -> None:
        """An item that failed to read may hold documents stored under ids of their own
        (the records of a JSON file, the lines of a corpus): unless the item is itself a
        stored document (kept, as reached), nothing is pruned after this run. (A web
        page is one document under its own id; a crawl says itself when it is cut short.)"""
        if self.context.stored.metadata(ref.id) is None:
            self.context.incomplete(f"{ref.uri} could not be read")

    def _unchanged(self, ref: ItemRef) -> Document | None:
        if ref.version is None:
            return None
        stored = self.context.stored.metadata(ref.id) or {}
        if stored.get(VERSION_KEY) != ref.version:
            return None
        return self.context.reuse(ref.id, {VERSION_KEY: ref.version})

    def _results(self, ref: ItemRef) -> Iterator[Any]:
        """What the type's ``fetch`` gives for ``ref``, one entry at a time."""
        result = self.source_type.fetch(ref)
        # many: a list, a generator...; one: a document, or any mistake (a dict, a str)
        single = isinstance(result, Document | FailedDocument | str | bytes | Mapping)
        many = not single and isinstance(result, Iterable)
        yield from result if many else [result]

    def _fetched(self, ref: ItemRef) -> Iterator[Item]:
        """The item's documents, checked. A plug-in's fetch runs on a thread of its own,
        bounded per item: ``ingest.plugin_fetch_timeout`` seconds of waiting for it and
        ``ingest.plugin_max_documents`` documents. Past either, the item fails naming the
        plug-in (what it gave before is kept) and the run counts as incomplete: the item
        may hold more, so nothing is pruned after it."""
        limits = self.limits
        what = f"source '{self.name}' (type '{self.config.type}')"
        bounded = (
            deadlines.Bounded(lambda: self._results(ref), limits.plugin_fetch_timeout)
            if self.plugin
            else None
        )
        results: Iterator[Any] = bounded if bounded is not None else self._results(ref)
        count = 0
        try:
            for item in results:
                if bounded is not None and count >= limits.plugin_max_documents:
                    self.context.incomplete(f"{what} gave too many documents for {ref.uri}")
                    error = (
                        f"{ref.uri}: {what} gave more than {limits.plugin_max_documents:,} "
                        f"documents for this item; the first {count:,} were kept, the rest "
                        "not read (ingest.plugin_max_documents)"
                    )
                    yield FailedDocument(uri=ref.uri, error=error)
                    return
                count += 1
                yield checked(item, ref, self.context)
        except FlexMatchError as exc:
            yield FailedDocument(uri=ref.uri, error=str(exc))
        except Exception as exc:  # a plug-in's bug: report it, keep the batch going
            yield FailedDocument(uri=ref.uri, error=f"{ref.uri}: {type(exc).__name__}: {exc}")
        finally:
            if bounded is not None:
                bounded.close()
        if bounded is not None and bounded.overdue:
            self.context.incomplete(f"{what} did not finish fetching {ref.uri}")
            error = (
                f"{ref.uri}: {what} did not finish fetching this item within "
                f"{limits.plugin_fetch_timeout:g}s and was left; {count:,} document(s) of it "
                "were kept (ingest.plugin_fetch_timeout)"
            )
            yield FailedDocument(uri=ref.uri, error=error)

    @staticmethod
    def _versioned(item: Item, ref: ItemRef) -> Item:
        """The item's version hint kept on its document, for the next run to compare."""
        if ref.version is None or not isinstance(item, Document) or item.id != ref.id:
            return item
        return item.model_copy(update={"metadata": {**item.metadata, VERSION_KEY: ref.version}})

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
            limit = self.limits.max_document_bytes
            items = list(load(LoadTask(path), self.name, limit, self.context.parse_file))
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
        return RecordsSource(self.context).records(records, first)
