"""Each source's ingest chains, built once and versioned by their definitions."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from flexmatch.access import Access, resolve_access
from flexmatch.config import SourceConfig, require_source
from flexmatch.engine.chains.base import Chain, ChainContext
from flexmatch.engine.chains.kinds import Chunker, MatchingTextChain, QualifyingTextChain
from flexmatch.engine.chains.registry import build_chain
from flexmatch.models import Document


@dataclass
class SourceChains:
    """The ingest chains one source resolves to."""

    chunker: Chunker
    matching_text: MatchingTextChain
    qualifying_text: QualifyingTextChain
    # who may read the source's documents (``sources.NAME.access`` and ``access_rules``):
    # not part of the fingerprint, as access never changes a version
    access: Access | None = None
    access_rules: dict[str, Access] = field(default_factory=dict)

    @classmethod
    def build(cls, config: SourceConfig, context: ChainContext) -> SourceChains:
        return cls(
            chunker=build_chain(config.chunker, Chunker, context),
            matching_text=build_chain(config.matching_text, MatchingTextChain, context),
            qualifying_text=build_chain(config.qualifying_text, QualifyingTextChain, context),
            access=config.access,
            access_rules=dict(config.access_rules),
        )

    def access_of(self, document: Document) -> list[str] | None:
        """The access tokens ``document`` is stored with (see ``flexmatch.access``)."""
        where = (document.uri or document.id)[:300]
        # rules match the place in the source, never the absolute path (a knowledge base
        # under /srv/hr/ must not match "*/hr/*" for every file)
        path = str(document.metadata.get("path") or document.metadata.get("file_name") or "")
        return resolve_access(document.metadata, path, self.access_rules, self.access, where)

    def fingerprint(self) -> str:
        """Changes whenever a chain's definition changes (its YAML, params, prompt text or
        model), so the documents it made get re-indexed."""
        definitions = [chain.definition() for chain in self.all()]
        return hashlib.sha256(json.dumps(definitions, sort_keys=True).encode()).hexdigest()[:16]

    def all(self) -> list[Chain]:
        return [self.chunker, self.matching_text, self.qualifying_text]


class SourceChainCache:
    """Each source's ingest chains, built on first use and kept until ``clear``: the one
    cache of them, held by a knowledge base and by each fan-out worker. ``sources`` is
    read on every call, so a caller that swaps its config is seen; ``where`` names that
    config in the error for an unknown source."""

    def __init__(
        self,
        sources: Callable[[], Mapping[str, SourceConfig]],
        context: ChainContext,
        where: str,
    ) -> None:
        self._sources = sources
        self._context = context
        self._where = where
        self._built: dict[str, SourceChains] = {}

    def get(self, source: str) -> SourceChains:
        config = require_source(self._sources(), source, self._where)
        chains = self._built.get(source)
        if chains is None:
            chains = self._built[source] = SourceChains.build(config, self._context)
        return chains

    def clear(self) -> None:
        self._built.clear()
