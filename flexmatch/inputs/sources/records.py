"""Records: structured entries (JSON objects, JSON Lines, a key/value JSON file) turned
into documents by a Jinja template named in the source config."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flexmatch.access import ACCESS_FIELD
from flexmatch.config import SourceConfig
from flexmatch.errors import ParseError
from flexmatch.inputs.sources.items import Item, SeenIds, attempt, given_id, json_lines
from flexmatch.models import Document, Element, FailedDocument
from flexmatch.payloads import derived_metadata
from flexmatch.templates import PromptTemplate, load_prompt

RECORD_VARIABLES = {"record", "key", "source"}
MAX_RECORD_DEPTH = 32  # objects and lists inside each other; deeper is not a record


def record_depth(value: Any) -> int:
    """How deeply objects and lists nest in ``value`` (iterative: any depth is safe)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_RECORD_DEPTH:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth) for child in children)
    return deepest


def load_template(config: SourceConfig, kb_dir: Path | None) -> PromptTemplate:
    return load_prompt(config.template, kb_dir, RECORD_VARIABLES)


def entries_in_file(path: Path) -> Iterator[tuple[str | None, Any, str] | FailedDocument]:
    """(key, record, where) for each entry: JSON Lines objects, a JSON list, or a JSON
    object of key/value entries (each entry one document)."""
    if path.suffix.lower() == ".jsonl":
        for entry in json_lines(path):
            yield entry if isinstance(entry, FailedDocument) else (None, *entry)
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))  # a BOM is no error
    except (OSError, ValueError) as exc:  # not UTF-8, not JSON, a 5,000-digit integer
        yield FailedDocument(uri=str(path), error=f"{path}: not a readable JSON file: {exc}")
        return
    except RecursionError:
        yield FailedDocument(uri=str(path), error=f"{path}: the JSON nests too deeply")
        return
    if isinstance(data, list):
        for index, item in enumerate(data):
            yield None, item, f"{path}[{index}]"
    elif isinstance(data, dict):
        for key, value in data.items():
            yield str(key), value, f"{path}#{key}"
    else:
        yield FailedDocument(uri=str(path), error=f"{path}: expected a JSON list or object")


def record_document(
    key: str | None,
    record: Any,
    where: str,
    source: str,
    config: SourceConfig,
    template: PromptTemplate,
) -> Document:
    """One record as a document; its id is the record's id field, its key, or its hash."""
    if key is None and not isinstance(record, dict):
        raise ParseError(f"{where}: a record must be a JSON object")
    if record_depth(record) > MAX_RECORD_DEPTH:
        raise ParseError(f"{where}: the record nests deeper than {MAX_RECORD_DEPTH} levels")
    access = record.get(ACCESS_FIELD) if isinstance(record, dict) else None
    # a record without an id is named by its content *and* its access: two records that
    # differ only in who may read them are two documents, never one (records without
    # access hash as they always did)
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False)
    if access is not None:  # who may read it: kept apart, never in its text (see access)
        record = {k: v for k, v in record.items() if k != ACCESS_FIELD}
    fields = record if isinstance(record, dict) else {}
    given = record_id(fields, key, where, config)
    document_id = (
        given
        if given is not None
        else hashlib.sha256(f"{source}\n{canonical}".encode()).hexdigest()[:24]
    )
    title = str(fields.get(config.title_field) or key or "")
    text = template.render(record=record, key=key, source=source)
    if not text.strip():
        raise ParseError(f"{where}: the record renders to empty text")
    elements = [Element(kind="paragraph", text=text.strip())]  # its lines, as rendered
    if title:
        elements = [Element(kind="title", text=title), *elements]
    metadata = derived_metadata(fields, reserved=("record",))  # bounded: see payloads
    if access is not None:
        metadata[ACCESS_FIELD] = access
    return Document(
        id=document_id,
        uri=where,
        source=source,
        title=title,
        elements=elements,
        metadata={**metadata, "record": True},
    )


def record_id(fields: Any, key: str | None, where: str, config: SourceConfig) -> str | None:
    """The record's own id: its ``id_field`` (a string or an integer), else its key."""
    if isinstance(fields, dict) and config.id_field in fields:
        return given_id(fields[config.id_field], where, config.id_field) or key
    return key or None


def record_documents(
    entries: Iterator[tuple[str | None, Any, str] | FailedDocument],
    source: str,
    config: SourceConfig,
    template: PromptTemplate,
) -> Iterator[Item]:
    """The documents of one batch of records; a record repeating a given id fails, naming
    the record that had it first (identical records without an id are one document)."""
    seen = SeenIds()
    for entry in entries:
        if isinstance(entry, FailedDocument):
            yield entry
            continue
        key, record, where = entry
        item = attempt(
            where,
            functools.partial(record_document, key, record, where, source, config, template),
        )
        given = key is not None or (
            isinstance(record, dict) and record.get(config.id_field) not in (None, "")
        )
        yield seen.claim(item, where) if given else item
