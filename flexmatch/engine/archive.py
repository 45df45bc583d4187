"""The documents a knowledge base holds, as they were indexed, and uploaded originals.

A committed document is kept here (compressed JSON of its parsed text and metadata), so
that ``reindex`` can re-run changed chains without the user's inputs, a metadata-only
update needs no new upload, and ``GET /v1/documents/{id}/original`` can give an uploaded
file back. One file per (tenant, document) in ``.flexmatch/archive``, named by a hash, so
no id a caller chooses can name a path.

It holds every tenant's text, so it is its owner's alone: files 600 (``mkstemp``) and
folders 700, made so, and narrowed at open when an older version made them 755
(another local user could otherwise list the hash names and count each kind's entries).
(``flexmatch.engine.folders`` makes the other state folders the same way.)
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, TypeAdapter

from flexmatch.access import ACCESS_FIELD, Access
from flexmatch.engine.folders import narrow_folder, private_folder
from flexmatch.models import Document, Element

_ELEMENTS = TypeAdapter(list[Element])
ELEMENTS_A_SLICE = 2_000


def document_json(document: Document) -> bytes:
    """The document as JSON (what ``model_dump_json`` gives, elements last), its elements
    serialised a slice at a time: one call over the 100,000 elements of a big minified
    script holds the GIL for most of a second, and a server's event loop waits that long."""
    head = document.model_dump_json(exclude={"elements"}).encode()
    elements = document.elements
    pieces = [head[:-1] + b',"elements":[']
    for start in range(0, len(elements), ELEMENTS_A_SLICE):
        if start:
            pieces.append(b",")
        pieces.append(_ELEMENTS.dump_json(elements[start : start + ELEMENTS_A_SLICE])[1:-1])
    pieces.append(b"]}")
    return b"".join(pieces)  # one copy: each of the tens of megabytes holds the GIL too


class Original(BaseModel):
    """An uploaded file, as it was sent (base64 in its JSON)."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    filename: str
    data: bytes


class DocumentArchive:
    """Archived documents and originals of one knowledge base, per tenant."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._narrow()

    def _narrow(self) -> None:
        """This archive's existing folders (and the state folder it is in) to 700, at
        open: a few hundred folders at most (two kinds of 256 shards)."""
        narrow_folder(self.folder.parent)
        if not self.folder.is_dir():
            return
        narrow_folder(self.folder)
        for kind in ("documents", "originals"):
            with contextlib.suppress(OSError):
                for entry in os.scandir(self.folder / kind):
                    if entry.is_dir(follow_symlinks=False):
                        narrow_folder(Path(entry.path))
                narrow_folder(self.folder / kind)

    def _path(self, tenant: str, document_id: str, kind: str) -> Path:
        key = hashlib.sha256(json.dumps([tenant, document_id]).encode()).hexdigest()
        return self.folder / kind / key[:2] / f"{key}.gz"

    def _write(self, path: Path, payload: bytes) -> None:
        private_folder(path.parent, root=self.folder.parent)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(gzip.compress(payload, compresslevel=5))
            os.replace(temporary, path)  # a reader sees the old copy or the new, whole
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def _read(self, path: Path) -> bytes | None:
        try:
            return gzip.decompress(path.read_bytes())
        except (FileNotFoundError, OSError, EOFError):
            return None

    def put(self, tenant: str, document: Document) -> None:
        self._write(self._path(tenant, document.id, "documents"), document_json(document))
        if document.original is not None:
            original = Original(filename=document.original_name or "upload", data=document.original)
            self._write(
                self._path(tenant, document.id, "originals"), original.model_dump_json().encode()
            )

    def has(self, tenant: str, document_id: str) -> bool:
        return self._path(tenant, document_id, "documents").is_file()

    def get(self, tenant: str, document_id: str) -> Document | None:
        raw = self._read(self._path(tenant, document_id, "documents"))
        return None if raw is None else Document.model_validate_json(raw)

    def original(self, tenant: str, document_id: str) -> Original | None:
        raw = self._read(self._path(tenant, document_id, "originals"))
        return None if raw is None else Original.model_validate_json(raw)

    def set_access(self, tenant: str, document_id: str, access: Access | None) -> None:
        """The stored copy's ``access`` metadata changed (``None``: the whole tenant's), so
        a re-index from it keeps the access an admin gave; no copy, nothing to do."""
        archived = self.get(tenant, document_id)
        if archived is None:
            return
        metadata = {k: v for k, v in archived.metadata.items() if k != ACCESS_FIELD}
        if access is not None:
            metadata[ACCESS_FIELD] = access.model_dump()
        self.put(tenant, archived.model_copy(update={"metadata": metadata}))

    def remove(self, tenant: str, document_id: str) -> None:
        for kind in ("documents", "originals"):
            self._path(tenant, document_id, kind).unlink(missing_ok=True)
