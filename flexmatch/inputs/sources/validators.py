"""Metadata that says when or how a copy of a document was read, not what it holds.

A document keeps the validators its source gave (an HTTP ETag and Last-Modified, a
source type's version hint) so the next run can ask whether it changed without reading
it; they and the fetch time never change the document's version (the engine's
``version_of`` leaves them out), so a page fetched again with the same text costs nothing.
"""

from __future__ import annotations

from typing import Any

from flexmatch.inputs.parsing._common import PARSER_REVISION

VERSION_KEY = "source_version"  # an item's version hint, kept in its document's metadata
VALIDATORS = frozenset({"etag", "last_modified", VERSION_KEY})
VOLATILE_METADATA = VALIDATORS | {"fetched_at"}


def validators(metadata: dict[str, Any]) -> dict[str, Any]:
    """The ``VALIDATORS`` among a document's metadata."""
    return {key: metadata[key] for key in VALIDATORS if key in metadata}


def read_version(hint: str) -> str:
    """A file's version hint (its size and time, a blob), with the revision of the
    parsers that read it: a copy stored before the parsers changed what they make of a
    file is read again, not reused."""
    return f"{hint}:parsers-{PARSER_REVISION}"
