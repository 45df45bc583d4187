"""What a stored point may hold: the one check every write passes before it reaches the store.

The store engine accepts values it cannot read back: a payload nested deeper than its
decoder's recursion limit (~127 levels) is written, and from then on every read of that
tenant fails and the store no longer reopens. Other values are refused only halfway
(NaN, lone surrogates) or silently changed (integers over 64 bits become floats, bytes
become lists). So every payload is checked here first, in full, before anything of its
document is written: by the ingest before a document's pending record, and by both
stores on every upsert (the funnel no writer can go around).

Document metadata has its own, tighter bounds: it is copied into every point of its
document (filters match it there), so its size multiplies by the document's points.
``derived_metadata`` is how sources that turn fields into metadata automatically
(records, JSON Lines) stay within them without failing the item.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from flexmatch.errors import PayloadError

MAX_PAYLOAD_DEPTH = 32  # objects and lists inside each other in one point's payload
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024  # one point's payload, as JSON
MAX_METADATA_FIELDS = 128
MAX_METADATA_BYTES = 16 * 1024  # a document's metadata, as JSON (copied into each point)
MAX_METADATA_DEPTH = 8  # inside one metadata value
MAX_KEY_CHARS = 128  # a metadata field name
MAX_ID_CHARS = 4_096  # a document id (a path, a URL, a plug-in's id): as long as a path may be
MAX_DERIVED_STRING = 1_000  # a string field longer than this stays text, not metadata
INT64 = (-(2**63), 2**63 - 1)


def check_value(value: Any, where: str, max_depth: int = MAX_PAYLOAD_DEPTH) -> int:
    """Raise ``PayloadError`` naming ``where`` unless ``value`` is JSON the store reads back
    unchanged: objects with string keys, lists, strings of valid Unicode, 64-bit integers,
    finite floats, booleans and null, nested at most ``max_depth`` levels. Iterative, so
    any depth is safe to check. Returns about how many bytes it takes as JSON (its text's
    UTF-8 bytes plus a few per value: no second pass to serialise it)."""
    size = 0
    # (value, depth, its parent's entry, its key or index): a path is spelled only for an error
    stack: list[tuple[Any, int, Any, Any]] = [(value, 0, None, None)]
    while stack:
        entry = stack.pop()
        item, depth = entry[0], entry[1]
        if isinstance(item, dict):
            if depth >= max_depth:
                raise _error(where, entry, f"nested more than {max_depth} levels deep")
            for key, child in item.items():
                if not isinstance(key, str):
                    raise _error(where, entry, f"a field name must be text, not {key!r}")
                size += _text_bytes(key, where, entry) + 4
                stack.append((child, depth + 1, entry, key))
        elif isinstance(item, list | tuple):  # a tuple is stored (and read back) as a list
            if depth >= max_depth:
                raise _error(where, entry, f"nested more than {max_depth} levels deep")
            size += 2
            stack.extend((child, depth + 1, entry, i) for i, child in enumerate(item))
        elif isinstance(item, str):
            size += _text_bytes(item, where, entry) + 3
        elif isinstance(item, bool) or item is None:
            size += 5
        elif isinstance(item, int):
            if not INT64[0] <= item <= INT64[1]:
                raise _error(where, entry, f"the integer {item} is outside the 64-bit range")
            size += 20
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _error(where, entry, f"{item} is not a storable number")
            size += 24
        else:
            raise _error(where, entry, f"a {type(item).__name__} is not a JSON value")
    return size


def _error(where: str, entry: tuple[Any, int, Any, Any], message: str) -> PayloadError:
    return PayloadError(f"{_path(where, entry)}: {message}")


def _path(where: str, entry: tuple[Any, int, Any, Any]) -> str:
    """``where`` and the keys down to ``entry``: ``doc.json: metadata.extra.k[3]``."""
    keys: list[str] = []
    while entry is not None and entry[2] is not None:
        key = entry[3]
        keys.append(f"[{key}]" if isinstance(key, int) else f".{str(key)[:40]}")
        entry = entry[2]
    return where + "".join(reversed(keys[-12:])) + (" …" if len(keys) > 12 else "")


def _text_bytes(text: str, where: str, entry: tuple[Any, int, Any, Any]) -> int:
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise _error(where, entry, f"the text holds an unpaired surrogate ({exc.reason})") from None


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON (after ``check_value``, it always serialises)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def check_payload(payload: Mapping[str, Any], where: str) -> None:
    """The store's own check of one point's payload: storable values, bounded size."""
    size = check_value(dict(payload), where)
    if size > MAX_PAYLOAD_BYTES:
        raise PayloadError(
            f"{where}: the point's payload is about {size:,} bytes, over {MAX_PAYLOAD_BYTES:,}"
        )


def check_document_id(document_id: str, where: str) -> None:
    """A document id the registry, the CLI and links can hold: 1 to ``MAX_ID_CHARS``
    characters (an empty id cannot be named again; a huge one is not an id)."""
    if not document_id.strip():
        raise PayloadError(f"{where}: the document id is empty")
    if len(document_id) > MAX_ID_CHARS:
        raise PayloadError(
            f"{where}: the document id is {len(document_id):,} characters, at most {MAX_ID_CHARS:,}"
        )


def check_metadata(metadata: Mapping[str, Any], where: str) -> None:
    """A document's metadata within its bounds, or a ``PayloadError`` naming the field."""
    if len(metadata) > MAX_METADATA_FIELDS:
        raise PayloadError(
            f"{where}: metadata has {len(metadata):,} fields, at most {MAX_METADATA_FIELDS} "
            "(keep the rest in the text)"
        )
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
            raise PayloadError(
                f"{where}: metadata field name {str(key)[:60]!r} must be 1 to "
                f"{MAX_KEY_CHARS} characters of text"
            )
        check_value(value, f"{where}: metadata field '{key[:60]}'", MAX_METADATA_DEPTH)
    size = json_size(dict(metadata))
    if size > MAX_METADATA_BYTES:
        raise PayloadError(
            f"{where}: metadata is {size:,} bytes as JSON, over {MAX_METADATA_BYTES:,} "
            "(it is copied into every point of the document; keep long values in the text)"
        )


def derived_metadata(fields: Mapping[str, Any], reserved: tuple[str, ...] = ()) -> dict[str, Any]:
    """Metadata made from an item's own fields: its scalar fields (short strings, 64-bit
    integers, finite floats, booleans) in order, as many as the bounds allow. Other
    fields stay in the item's text only, so a wide or deep item is still indexed."""
    kept: dict[str, Any] = {}
    size = 2  # "{}"
    for key, value in fields.items():
        if len(kept) >= MAX_METADATA_FIELDS - 1:  # one left for the source's own marker
            break
        if key in reserved or not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS:
            continue
        if not _derivable(value):
            continue
        try:
            cost = json_size({key: value}) - 1
        except (UnicodeEncodeError, ValueError):
            continue
        if size + cost > MAX_METADATA_BYTES - 64:
            continue
        kept[key] = value
        size += cost
    return kept


def _derivable(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return INT64[0] <= value <= INT64[1]
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        if len(value) > MAX_DERIVED_STRING:
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    return False
