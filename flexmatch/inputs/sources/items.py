"""What a loader yields (``Item``: a document, or a failure naming its input), and the
small helpers every input kind shares: ids, one failure per bad input, JSON Lines. No
parser is imported here, so records and sources can use them without the formats."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from flexmatch.errors import FlexMatchError, ParseError
from flexmatch.models import Document, FailedDocument

Item = Document | FailedDocument


def document_id(source: str, uri: str) -> str:
    """A stable id for a document without one of its own: source + location."""
    return hashlib.sha256(f"{source}\n{uri}".encode()).hexdigest()[:24]


def given_id(value: Any, where: str, field: str) -> str | None:
    """A record's own id as a document id: a string, or an integer in decimal (so ``1``
    and ``"1"`` name the same document); none when absent or empty. Other JSON values
    (``true``, ``1.5``, objects, lists) are refused: their text form is no stable name."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    kinds = {bool: "a boolean", float: "a decimal number", dict: "an object", list: "a list"}
    kind = kinds.get(type(value), type(value).__name__)
    raise ParseError(f"{where}: the id ('{field}') must be a string or an integer, not {kind}")


class SeenIds:
    """The ids already given in one batch (a file, a request): a second record with the
    same id is refused, naming the first, instead of silently replacing it."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}

    def claim(self, item: Item, where: str) -> Item:
        """``item``, or a failure when its id was taken earlier in the batch."""
        if not isinstance(item, Document):
            return item
        first = self._first.get(item.id)
        if first is None:
            self._first[item.id] = where
            return item
        return FailedDocument(
            uri=where,
            error=f"{where}: id '{item.id}' is already used by {first} in the same batch; "
            'ids must be unique (1 and "1" are the same id)',
        )


def attempt(uri: str, build: Callable[[], Document]) -> Item:
    """The document ``build`` makes, or a failure naming ``uri``: one bad input never
    stops a bulk import, whatever went wrong in it."""
    try:
        return build()
    except FlexMatchError as exc:
        return FailedDocument(uri=uri, error=str(exc))
    except Exception as exc:  # a parser bug: report it, keep the batch going
        return FailedDocument(uri=uri, error=f"{uri}: {type(exc).__name__}: {exc}")


def json_lines(path: Path) -> Iterator[tuple[Any, str] | FailedDocument]:
    """(value, where) for each non-empty line of a JSON Lines file; bad lines named."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{number}"
            try:
                yield json.loads(raw.decode("utf-8-sig")), where  # a BOM is no error
            except UnicodeDecodeError:
                yield FailedDocument(uri=where, error=f"{where}: not UTF-8 text")
            except json.JSONDecodeError as exc:
                yield FailedDocument(uri=where, error=f"{where}: not valid JSON: {exc.msg}")
            except ValueError as exc:  # an integer of over 4,300 digits
                yield FailedDocument(uri=where, error=f"{where}: not readable JSON: {exc}")
            except RecursionError:
                yield FailedDocument(uri=where, error=f"{where}: the JSON nests too deeply")
