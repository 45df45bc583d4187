"""What an ingest takes of an open knowledge base: its config, store, models, worker
pools, archive and runs in progress. ``engine.runtime.Runtime`` is one; the ingest path
names only what it uses, so it does not depend on how a knowledge base is opened."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from flexmatch.config import KBConfig
from flexmatch.engine.archive import DocumentArchive
from flexmatch.engine.chains import ChainContext
from flexmatch.engine.documents import ActiveRuns
from flexmatch.engine.embedders import Embedder
from flexmatch.engine.llm import LLM
from flexmatch.engine.stores import VectorStore
from flexmatch.inputs.isolation import IsolatedPool


class Resources(Protocol):
    """An open knowledge base's resources, as the ingest path uses them."""

    path: Path
    context: ChainContext
    archive: DocumentArchive
    active_runs: ActiveRuns
    parse_workers: IsolatedPool
    fetch_workers: IsolatedPool

    @property
    def config(self) -> KBConfig: ...
    @property
    def store(self) -> VectorStore: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def llm(self) -> LLM | None: ...
    @property
    def llm_cache_file(self) -> Path: ...
    @property
    def state_dir(self) -> Path: ...
    def store_for_now(self) -> AbstractContextManager[VectorStore]:
        """The store, closed again afterwards unless it was open before."""
        ...
