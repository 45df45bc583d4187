"""The documents a knowledge base holds, as they were indexed, and uploaded originals.

A committed document is kept here (compressed JSON of its parsed text and metadata), so
that ``reindex`` can re-run changed chains without the user's inputs, a metadata-only
update needs no new upload, and ``GET /v1/documents/{id}/original`` can give an uploaded
file back. One file per (tenant, document) in ``.flexmatch/archive``, named by a hash, so
no id a caller chooses can name a path.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from flexmatch.models import Document


class Original(BaseModel):
    """An uploaded file, as it was sent (base64 in its JSON)."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    filename: str
    data: bytes


class DocumentArchive:
    """Archived documents and originals of one knowledge base, per tenant."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, tenant: str, document_id: str, kind: str) -> Path:
        key = hashlib.sha256(json.dumps([tenant, document_id]).encode()).hexdigest()
        return self.folder / kind / key[:2] / f"{key}.gz"

    def _write(self, path: Path, payload: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
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
        self._write(
            self._path(tenant, document.id, "documents"), document.model_dump_json().encode()
        )
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

    def remove(self, tenant: str, document_id: str) -> None:
        for kind in ("documents", "originals"):
            self._path(tenant, document_id, kind).unlink(missing_ok=True)
