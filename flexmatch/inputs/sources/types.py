"""Source types: how a source's inputs become documents, as plug-ins.

A source type *lists* the items a source holds (each an ``ItemRef``: a stable id, where
it is, and a cheap version hint when it has one) and *fetches* one item into documents.
The built-in ``files``, ``web``, ``records`` and ``git`` register through the
``flexmatch.sources`` entry-point group like any plug-in (a checkout without installed
metadata registers them from ``BUILTIN``, the same table pyproject.toml declares). A
config names a type by name, never an import path; a plug-in's own settings live under
the source's ``options`` and are checked by its ``options`` model.

A type reaches the knowledge base only through its ``SourceContext``: the source's
config, the killable worker processes (``parse``, ``fetch_page``), and what the store
holds of its documents (``stored``) so an unchanged item is not fetched or parsed again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError

from flexmatch import plugins
from flexmatch.config import IngestConfig, SourceConfig
from flexmatch.errors import ConfigError, WebImportError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.parsing import parse_file
from flexmatch.inputs.sources.fetch import FetchedPage, request
from flexmatch.inputs.sources.items import Item, document_id
from flexmatch.inputs.sources.web_policy import WebPolicy
from flexmatch.models import Document, FailedDocument, ParsedDocument
from flexmatch.yamlio import validation_message

ENTRY_POINT_GROUP = plugins.SOURCE_TYPES.group
# the built-ins, as pyproject.toml declares them (a test keeps the two equal)
BUILTIN = {
    "files": "flexmatch.inputs.sources.builtin:FilesSource",
    "git": "flexmatch.inputs.sources.git:GitSource",
    "records": "flexmatch.inputs.sources.builtin:RecordsSource",
    "web": "flexmatch.inputs.sources.builtin:WebSource",
}

T = TypeVar("T")


@dataclass(frozen=True)
class ItemRef:
    """One item a source holds.

    ``id`` is stable across runs (the id of the document it yields, or of its first);
    ``version`` is a cheap hint that changes when the item does (a file's size and
    mtime, a revision number): when the stored copy carries the same hint, the item is
    not fetched again. ``data`` is the type's own (a path, a record, a fetched page);
    ``count`` is how many documents it yields, for the plan.
    """

    id: str
    uri: str
    version: str | None = None
    data: Any = None
    count: int = 1


@dataclass(frozen=True)
class WebPage:
    """``ItemRef.data`` of a single web page: the reader fetches it (conditionally, when a
    copy is stored) under the source's web rules, whatever the source's type."""

    url: str


def _nothing(_: str) -> None:
    return None


@dataclass(frozen=True)
class StoredCopies:
    """What the knowledge base holds of this source's documents, handed down by the
    facade (the engine's registry and archive): committed metadata and stored copies by
    document id, and a file where the source may keep state between runs."""

    metadata: Callable[[str], dict[str, Any] | None] = _nothing
    document: Callable[[str], Document | None] = _nothing
    state_file: Path | None = None


@dataclass
class ReadLog:
    """What a run read, for ``--prune`` and the report: every id it reached, how many
    items were found unchanged without reading them, and why it may not have seen the
    whole source."""

    reached: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)  # reached, but answered gone (HTTP 404/410)
    documents: int = 0
    not_modified: int = 0
    incomplete: list[str] = field(default_factory=list)
    empty: list[Path] = field(default_factory=list)  # configured paths that listed no file
    warnings: list[str] = field(default_factory=list)  # for the report: what was bounded
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reach(self, document_id: str, *, read: bool = False) -> None:
        """``document_id`` was listed (``read``: a document of it was read)."""
        with self._lock:  # pages are read on several threads at once
            self.reached.add(document_id)
            self.documents += read

    def unchanged(self) -> None:
        with self._lock:
            self.not_modified += 1


@dataclass
class SourceContext:
    """A source type's view of the knowledge base (one per source and run)."""

    name: str  # the source's name in flexmatch.yaml
    config: SourceConfig
    options: Any  # the type's ``options`` model, validated (None when it has none)
    kb_dir: Path | None
    limits: IngestConfig
    stored: StoredCopies = field(default_factory=StoredCopies)
    workers: IsolatedPool | None = None  # parse in these processes (else in this one)
    fetchers: IsolatedPool | None = None  # fetch in these processes
    log: ReadLog = field(default_factory=ReadLog)

    def document_id(self, uri: str) -> str:
        """A stable id for an item without one of its own: this source + its location."""
        return document_id(self.name, uri)

    @property
    def policy(self) -> WebPolicy:
        """The source's web rules: allowed hosts, deadline, redirects, byte cap."""
        return WebPolicy(
            allow_hosts=frozenset(h.lower() for h in self.config.allow_hosts),
            timeout=self.config.timeout,
            max_redirects=self.config.max_redirects,
            max_bytes=self.limits.max_document_bytes,
        )

    def parse(self, function: Callable[..., T], *args: Any, label: str) -> T:
        """``function(*args)`` in a parser process, stopped at ``ingest.parse_timeout``
        (a module-level function: it is sent to the worker by name)."""
        if self.workers is None:
            return function(*args)
        return self.workers.run(function, *args, label=label)

    def parse_file(self, path: Path) -> ParsedDocument:
        """One file, read under the knowledge base's byte cap and ``parsers`` setting."""
        limits = self.limits
        return self.parse(
            parse_file, path, limits.max_document_bytes, limits.parsers, label=str(path)
        )

    def fetch_page(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        *,
        accept: Callable[[str], bool] | None = None,
        max_bytes: int | None = None,
        follow_redirects: bool = True,
        truncate: bool = False,
    ) -> FetchedPage:
        """GET ``url`` in a fetcher process under the source's web rules (every redirect
        hop through the address guard), killed at the source's ``timeout``. Any status
        comes back; a body only with a 2xx whose content type ``accept`` takes (a
        module-level function); a redirect not followed comes back with its location.
        ``truncate``: a body past the byte cap is cut there rather than refused."""
        policy = self.policy if max_bytes is None else replace(self.policy, max_bytes=max_bytes)
        if truncate:
            policy = replace(policy, truncate=True)
        if self.fetchers is None:
            return request(url, policy, headers, accept, follow_redirects)
        return self.fetchers.run(
            request,
            url,
            policy,
            headers,
            accept,
            follow_redirects,
            label=url,
            timeout=policy.timeout,
            what="fetching",
            setting="the source's timeout",
            error=WebImportError,
        )

    def reuse(self, document_id: str, expected: Mapping[str, Any] | None = None) -> Document | None:
        """The stored copy of ``document_id``, counted as not modified; None when there is
        none, or when its metadata does not carry the ``expected`` values (the validators
        or version the decision was made on)."""
        document = self.stored.document(document_id)
        if document is None or document.source != self.name:
            return None
        if any(document.metadata.get(k) != v for k, v in (expected or {}).items()):
            return None
        self.log.unchanged()
        return document

    def warn(self, message: str) -> None:
        """Say something this run bounded (a limit applied to what a site asked for): it
        goes to the run's report, and to the log."""
        logging.getLogger("flexmatch.sources").warning("source '%s': %s", self.name, message)
        self.log.warnings.append(message)

    def incomplete(self, reason: str) -> None:
        """Say this run did not see the whole source (a seed was unreachable, a page
        limit was hit): nothing is pruned after it."""
        self.log.incomplete.append(reason)

    def load_state(self) -> dict[str, Any]:
        """What this source kept from its last run (``save_state``); {} at first."""
        path = self.stored.state_file
        if path is None:
            return {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save_state(self, state: dict[str, Any]) -> None:
        path = self.stored.state_file
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
        temporary.replace(path)


def state_file(folder: Path, tenant: str, source: str) -> Path:
    """Where a source keeps its state for one tenant (named by a hash: no tenant or
    source name a caller chooses can name a path)."""
    key = hashlib.sha256(json.dumps([tenant, source]).encode()).hexdigest()[:32]
    return folder / f"{key}.json"


class SourceType:
    """Base of every source type: list the items, fetch one.

    ``options`` is a pydantic model for the type's own settings (the source's
    ``options:`` in flexmatch.yaml; no model: the type takes none). ``prunable`` says the
    listing of a run without inputs is the whole source, so a document not listed is
    gone (``flexmatch ingest --prune``). A type whose listing fetches as it goes (a
    crawl) sets ``streams`` and gives ``expected``, an upper bound for progress.
    """

    name: ClassVar[str] = ""  # set when registered
    options: ClassVar[type[BaseModel] | None] = None
    prunable: ClassVar[bool] = False

    def __init__(self, context: SourceContext) -> None:
        self.context = context

    @property
    def streams(self) -> bool:
        return False

    def lists_whole_source(self) -> bool:
        """Whether a run without inputs lists every item the source holds (what
        ``prune`` needs): the class's ``prunable``, or what the source's config says."""
        return self.prunable

    def unlisted(self) -> str | None:
        """Why a run without inputs would find nothing to read (``sync`` skips the
        source, saying so); None when the source lists its own items."""
        return None

    def scope(self) -> list[Path] | None:
        """Where a run without inputs looks (files and folders): ``prune`` removes only
        documents stored from under them, so one ingested from elsewhere is kept. None:
        the listing covers every document of the source."""
        return None

    def expected(self) -> int:
        return 0

    def list_items(self, inputs: list[str]) -> Iterable[ItemRef | Item]:
        """The items ``inputs`` name (no inputs: the source's own, from its config).
        An input that cannot be listed is a ``FailedDocument`` naming it."""
        raise NotImplementedError

    def fetch(self, ref: ItemRef) -> Item | Iterable[Item]:
        """The document(s) of one item; a failure is a ``FailedDocument`` (or raise a
        ``FlexMatchError`` naming the item: the reader records it and goes on)."""
        raise NotImplementedError


SourceT = TypeVar("SourceT", bound=type[SourceType])


def _accept(name: str, cls: Any, where: str) -> list[tuple[str, type[SourceType]]]:
    if not (isinstance(cls, type) and issubclass(cls, SourceType)):
        raise TypeError(f"source type '{name}' ({where}) must be a subclass of SourceType")
    cls.name = name
    return [(name, cls)]


SOURCE_TYPES: plugins.Registry[str, type[SourceType]] = plugins.Registry(
    plugins.SOURCE_TYPES, tuple(BUILTIN.items()), _accept
)


def register(name: str) -> Callable[[SourceT], SourceT]:
    """Class decorator: make ``cls`` the source type ``name`` (for code that registers
    in-process; an installed package uses the ``flexmatch.sources`` entry points)."""

    def decorate(cls: SourceT) -> SourceT:
        SOURCE_TYPES.register(name, cls, f"{cls.__module__}:{cls.__qualname__}")
        return cls

    return decorate


def registered() -> list[str]:
    """The names of the available source types."""
    return SOURCE_TYPES.names()


def source_type(name: str, where: str) -> type[SourceType]:
    """The type ``name`` registers, or a ConfigError at ``where`` naming the known ones."""
    return SOURCE_TYPES.get(name, f"{where}: field 'type'")


def source_options(cls: type[SourceType], config: SourceConfig, where: str) -> Any:
    """The source's ``options`` checked against the type's model."""
    if cls.options is None:
        if config.options:
            raise ConfigError(f"{where}: field 'options': source type '{cls.name}' takes none")
        return None
    try:
        return cls.options.model_validate(config.options)
    except ValidationError as exc:
        raise ConfigError(validation_message(f"{where} (options)", exc)) from None


def _short(value: Any) -> str:
    """A plug-in's value in an error: its repr, at most 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _owned(document: Document, uri: str, context: SourceContext) -> Item:
    """``document`` when it is of this source; else a failure of it alone. A document
    naming another source would be chunked by that source's chains and stored as its,
    or, when no such source exists, stop the whole run as a config error."""
    if document.source == context.name:
        return document
    error = (
        f"{uri}: source type '{context.config.type}' of source '{context.name}' returned "
        f"document {_short(document.id)} of source {_short(document.source)}; a source's "
        f"documents name it as their source"
    )
    return FailedDocument(uri=uri, error=error)


def listed(entry: Any, context: SourceContext) -> ItemRef | Item:
    """One entry a type's listing gave, checked: an ``ItemRef`` whose ``id`` and ``uri``
    are text (and ``count`` a whole number), a document of this source, or a failure.
    Anything else is a plug-in's mistake, named as one failed input; the run goes on,
    counted incomplete (the entry may stand for an item that exists: nothing is pruned)."""
    if isinstance(entry, FailedDocument):
        return entry
    if isinstance(entry, Document):
        return _owned(entry, entry.uri, context)
    what = f"source '{context.name}' (type '{context.config.type}')"
    uri = f"source:{context.name}"
    if isinstance(entry, ItemRef):
        wrong = [name for name in ("id", "uri") if not _text(getattr(entry, name))]
        if entry.version is not None and not isinstance(entry.version, str):
            wrong.append("version")
        if type(entry.count) is not int or entry.count < 0:
            wrong.append("count")
        if not wrong:
            return entry
        uri = entry.uri if _text(entry.uri) else uri
        fields = ", ".join(f"{name} {_short(getattr(entry, name))}" for name in wrong)
        error = (
            f"{what} listed an item with a wrong {fields} (id and uri are non-empty "
            f"strings, version a string or None, count a whole number)"
        )
    else:
        error = f"{what} listed {type(entry).__name__}, not an ItemRef or a document"
    reason = f"{what} listed something that is not an item"
    if reason not in context.log.incomplete:
        context.incomplete(reason)
    return FailedDocument(uri=uri, error=error)


def checked(item: Any, ref: ItemRef, context: SourceContext) -> Item:
    """One item a type's ``fetch`` gave, checked: anything but a document of this source
    or a failure is a plug-in's mistake, named as a failure of the item."""
    if isinstance(item, FailedDocument):
        return item
    if isinstance(item, Document):
        return _owned(item, ref.uri, context)
    error = f"{ref.uri}: the source type returned {type(item).__name__}, not a document"
    return FailedDocument(uri=ref.uri, error=error)
