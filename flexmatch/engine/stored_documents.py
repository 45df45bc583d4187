"""A knowledge base's documents as an admin sees them: the records in the store
(``documents.DocumentRegistry``) and the copies in the archive (``archive``), kept in
step: a document removed goes from both, a change of access reaches both."""

from __future__ import annotations

from collections.abc import Callable

from flexmatch.access import Access, Principal
from flexmatch.engine.archive import DocumentArchive, Original
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.stores import VectorStore
from flexmatch.engine.writes import Writes
from flexmatch.errors import DocumentNotFoundError
from flexmatch.models import Document, DocumentDetail, DocumentRecord, Stats


class StoredDocuments:
    """The documents of one knowledge base (``store``: its store, opened on first use;
    ``writes`` hears the tenant after a removal or an access change)."""

    def __init__(
        self,
        store: Callable[[], VectorStore],
        archive: DocumentArchive,
        writes: Writes | None = None,
    ) -> None:
        self._store = store
        self.archive = archive
        self.writes = writes or Writes()

    @property
    def registry(self) -> DocumentRegistry:
        return DocumentRegistry(self._store())

    def list(
        self, tenant: str, source: str | None, principal: Principal | None
    ) -> list[DocumentRecord]:
        return self.registry.list(tenant, source, principal)

    def get(self, tenant: str, document_id: str, principal: Principal | None) -> DocumentDetail:
        """Raises ``DocumentNotFoundError`` for one ``principal`` may not read, too."""
        detail = self.registry.detail(tenant, document_id, principal)
        if detail is None:
            raise _not_found(tenant, document_id)
        return detail

    def remove(self, tenant: str, document_id: str, principal: Principal | None = None) -> None:
        """One ``principal`` may not read is not found (and not removed), like one that
        does not exist."""
        if principal is not None:
            self.get(tenant, document_id, principal)
        try:
            if not self.registry.remove(tenant, document_id):
                raise _not_found(tenant, document_id)
            self.archive.remove(tenant, document_id)
        finally:  # a removal that failed midway may have deleted points already
            self.writes.written(tenant)

    def stored_copy(self, tenant: str, document_id: str) -> Document | None:
        return self.archive.get(tenant, document_id)

    def required_copy(
        self, tenant: str, document_id: str, principal: Principal | None = None
    ) -> Document:
        """The stored copy a re-index of one document reads (no copy: say what to do);
        one ``principal`` may not read is not found."""
        self.get(tenant, document_id, principal)
        document = self.archive.get(tenant, document_id)
        if document is None:
            raise DocumentNotFoundError(
                f"document '{document_id}' has no stored copy (it was ingested before "
                "FlexMatch kept one); ingest it again from its source"
            )
        return document

    def original(self, tenant: str, document_id: str, principal: Principal | None) -> Original:
        self.get(tenant, document_id, principal)
        original = self.archive.original(tenant, document_id)
        if original is None:
            raise DocumentNotFoundError(
                f"document '{document_id}' was not uploaded as a file: no original is kept"
            )
        return original

    def set_access(self, tenant: str, document_id: str, access: Access | None) -> DocumentRecord:
        record = self.registry.get(tenant, document_id)
        if record is None:
            raise _not_found(tenant, document_id)
        try:
            self.archive.set_access(tenant, document_id, access)
            return self.registry.set_access(tenant, record, access.tokens() if access else None)
        finally:  # points narrowed before a failure are in force
            self.writes.written(tenant)

    def restricted(self, tenant: str) -> bool:
        return self.registry.restricted(tenant)

    def stats(self, tenant: str, principal: Principal | None) -> Stats:
        return self.registry.stats(tenant, principal)


def _not_found(tenant: str, document_id: str) -> DocumentNotFoundError:
    return DocumentNotFoundError(f"no document '{document_id}' in tenant '{tenant}'")
