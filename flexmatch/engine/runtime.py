"""What an open knowledge base holds besides its config: the chain context (and LLM), the
store and the embedding model (each opened on first use, once, whichever thread asks),
the worker pools that parse and fetch, the archive of committed documents, and the
ingest runs in progress. The facade opens one; ingest, query and document management
take what they need from it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from flexmatch.config import LOCAL_EMBEDDING_MODELS, KBConfig, ModelsConfig
from flexmatch.engine.archive import DocumentArchive
from flexmatch.engine.chains import ChainContext
from flexmatch.engine.documents import ActiveRuns
from flexmatch.engine.embedders import Embedder, make_embedder
from flexmatch.engine.llm import LLM
from flexmatch.engine.stores import VectorStore, open_store
from flexmatch.errors import StoreError
from flexmatch.inputs.isolation import IsolatedPool

STATE_DIR = ".flexmatch"
LLM_CACHE_FILE = "llm-cache.sqlite"


class Runtime:
    """The resources of one open knowledge base in ``path``; ``config`` is read through
    ``current_config`` on every use, so a facade that swaps its config is seen."""

    def __init__(
        self,
        path: Path,
        current_config: Callable[[], KBConfig],
        *,
        env: dict[str, str] | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.path = path
        self._config = current_config
        config = current_config()
        llm = LLM.from_config(config.models, self.llm_cache_file)
        self.context = ChainContext(kb_dir=path, llm=llm, env=env)
        self._embedder = embedder
        self._store: VectorStore | None = None
        self._store_lock = threading.Lock()
        self._embedder_lock = threading.Lock()
        ingest = config.ingest
        self.parse_workers = IsolatedPool(
            workers=ingest.parse_workers,
            timeout=ingest.parse_timeout,
            memory_mb=ingest.parse_memory_mb,
        )
        self.fetch_workers = IsolatedPool(
            workers=ingest.fetch_workers, memory_mb=ingest.parse_memory_mb
        )
        self.archive = DocumentArchive(path / STATE_DIR / "archive")
        self.active_runs = ActiveRuns()
        # told when this process takes (True) and lets go of (False) the embedded store
        self.on_store_held: Callable[[bool], None] | None = None
        # asked before the store closes between uses: False while others' calls run on it
        self.may_close_store: Callable[[], bool] | None = None

    @property
    def config(self) -> KBConfig:
        return self._config()

    @property
    def llm(self) -> LLM | None:
        return self.context.llm

    @property
    def llm_cache_file(self) -> Path:
        return self.path / STATE_DIR / LLM_CACHE_FILE

    @property
    def state_dir(self) -> Path:
        return self.path / STATE_DIR

    @property
    def store_path(self) -> Path:
        """Where an embedded store keeps its files (``store.path``, from the folder)."""
        path = Path(self.config.store.path)
        return path if path.is_absolute() else self.path / path

    @property
    def store(self) -> VectorStore:
        """The store of ``store`` settings, opened on first use."""
        with self._store_lock:  # two threads must not open the embedded store twice
            if self._store is None:
                settings = self.config.store
                self._store = open_store(
                    path=self.store_path,
                    url=settings.url,
                    api_key=settings.api_key,
                    collection=settings.collection,
                    lock_timeout=settings.lock_timeout,
                    cluster=settings.cluster_settings(),
                    on_hold=self.on_store_held,
                )
            return self._store

    @contextmanager
    def store_for_now(self) -> Iterator[VectorStore]:
        """The store, closed again afterwards unless it was open before: a reader that
        only looks something up holds no (locked) store while web servers answer."""
        with self._store_lock:
            was_open = self._store is not None
        store = self.store
        try:
            yield store
        finally:
            if not was_open:
                self.close_store()

    def close_store(self) -> None:
        """Close the store until the next use opens it again (its lock freed); kept open
        while calls other processes made through its socket run (``may_close_store``):
        they hold it, and closing it under them would fail them."""
        if self.may_close_store is None or self.may_close_store():
            self._close_store()

    def _close_store(self) -> None:
        with self._store_lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    @property
    def opened_store(self) -> VectorStore | None:
        """The store if it is open now (nothing is opened to say)."""
        return self._store

    @property
    def embedder(self) -> Embedder:
        """The embedding model of ``models``, made on first use (loaded on first embed)."""
        with self._embedder_lock:
            if self._embedder is None:
                self._embedder = make_embedder(self._embedding_models())
            return self._embedder

    def _embedding_models(self) -> ModelsConfig:
        """``models``, but a config that names no embedding model keeps the packaged one
        its store was built with: the default depends on the CPU (int8 with VNNI) and
        changed with it, and a store must go on being searched with the vectors it holds.
        A store that cannot be read now (a server that is down) leaves the default: the
        model then loads, and a mismatch is refused by the first ingest that writes."""
        models = self.config.models
        if "embedding" in models.model_fields_set:
            return models
        try:
            recorded = self.store.recorded_model()
        except StoreError:
            return models
        if recorded in LOCAL_EMBEDDING_MODELS and recorded != models.embedding:
            return models.model_copy(update={"embedding": recorded})
        return models

    def close(self) -> None:
        self.parse_workers.close()
        self.fetch_workers.close()
        self._close_store()
        if self.llm is not None:
            self.llm.cache.close()
