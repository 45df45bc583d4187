"""Versions: what a document's committed version is named by (text, metadata, chains)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from flexmatch.access import ACCESS_FIELD
from flexmatch.engine.chains.sources import SourceChains
from flexmatch.inputs.sources.files import NAMING_METADATA
from flexmatch.inputs.sources.validators import VOLATILE_METADATA
from flexmatch.models import Document, DocumentRecord


def stored_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """A document's metadata as its record and points keep it: without ``access``, which
    they hold apart (so a change of it is no change of metadata)."""
    if ACCESS_FIELD not in metadata:
        return metadata
    return {k: v for k, v in metadata.items() if k != ACCESS_FIELD}


def document_version(document: Document, chains: SourceChains) -> str:
    """Changes with the text, the metadata or the chains, so any of them re-indexes."""
    return version_of(document.content_hash, document.metadata, chains)


def version_of(
    content_hash: str, metadata: dict[str, Any], chains: SourceChains, *, named: bool = False
) -> str:
    """The version a document of this text and metadata gets from these chains (a stored
    record has both, so its current version can be checked without the document). How
    the file was named (``NAMING_METADATA``) is left out, unless ``named``: the version
    records made before that rule were given."""
    left_out = VOLATILE_METADATA | {ACCESS_FIELD} | (set() if named else NAMING_METADATA)
    kept = {k: v for k, v in metadata.items() if k not in left_out}
    blob = json.dumps([content_hash, chains.fingerprint(), kept], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def is_current(
    record: DocumentRecord,
    version: str,
    content_hash: str,
    metadata: dict[str, Any],
    chains: SourceChains,
) -> bool:
    """Whether ``record``'s committed version is ``version``, the one this text and
    metadata get now; or the one they got when a file's place in a walked folder still
    counted (read from the record), so a knowledge base made then is not re-indexed."""
    if record.version is None:
        return False
    if record.version == version:
        return True
    placed = {k: v for k, v in metadata.items() if k not in NAMING_METADATA}
    placed |= {k: v for k, v in record.metadata.items() if k in NAMING_METADATA}
    return record.version == version_of(content_hash, placed, chains, named=True)


def with_naming_of(document: Document, record: DocumentRecord | None) -> Document:
    """``document`` with the naming metadata its stored record has and it lacks: a walked
    file's ``path`` stays known when the file is next named on its own."""
    if record is None:
        return document
    kept = {
        k: v
        for k, v in record.metadata.items()
        if k in NAMING_METADATA and k not in document.metadata
    }
    if not kept:
        return document
    return document.model_copy(update={"metadata": {**document.metadata, **kept}})
