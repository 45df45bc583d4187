"""The Ray side of a distributed ingest: one ``IngestWorker`` actor parses files and
fetches pages in its own isolated processes, and chunks, enriches and embeds documents,
handing back values (its answer, or the error it met as a message), never a remote
traceback. It never opens the store: the driver (``fanout``) writes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from flexmatch.config import LOCAL_EMBEDDING_MODELS, KBConfig
from flexmatch.engine.chains import ChainContext
from flexmatch.engine.chains.sources import SourceChainCache
from flexmatch.engine.embedders import EmbeddingBatcher, make_embedder
from flexmatch.engine.ingest.embed import prepare
from flexmatch.engine.llm import LLM
from flexmatch.errors import FlexMatchError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.models import Chunk, Document, Usage


@dataclass
class WorkerInfo:
    """What a worker says once it is ready (or why it could not start)."""

    pid: int
    node: str
    embedding_model: str
    error: str | None = None


@dataclass
class Raised:
    """An error a worker met, handed back as a value (a message, not a remote traceback)."""

    error: FlexMatchError


@dataclass
class WorkResult:
    """A worker's answer for one document: its enrichment, or the error it met."""

    chunks: list[Chunk] = field(default_factory=list)
    vectors: Any = None  # float32 array, one row per matching text
    fingerprint: str = ""  # of the chains it ran, checked against the driver's
    usage: Usage = field(default_factory=Usage)  # LLM usage since the worker's last answer
    error: FlexMatchError | None = None


class IngestWorker:
    """One Ray actor of a distributed ingest: parses files and fetches pages (in its own
    isolated processes), enriches and embeds documents.

    It builds the LLM client, the embedding model and (on first use) each source's
    chains from the knowledge base's folder and config, once; it never opens the store.
    LLM calls are bounded per worker (``models.llm_concurrency``), and the documents it
    holds at once share its embedding batches.
    """

    def __init__(
        self,
        kb_dir: str,
        config: KBConfig,
        env: dict[str, str] | None,
        llm_cache: str | None,
        cwd: str,
    ) -> None:
        self.error: str | None = None
        if Path(cwd).is_dir():  # relative paths mean what they mean to the driver
            os.chdir(cwd)
        self.kb_dir = Path(kb_dir)
        self.config = config
        self.embedding_model = config.models.embedding
        try:
            cache = Path(llm_cache) if llm_cache and Path(llm_cache).parent.is_dir() else None
            self.llm = LLM.from_config(config.models, cache)
            self.context = ChainContext(kb_dir=self.kb_dir, llm=self.llm, env=env)
            self.chains = SourceChainCache(
                lambda: self.config.sources, self.context, "the workers' config"
            )
            self.embedder = make_embedder(config.models)
            self.embedding_model = self.embedder.name
            if self.embedding_model in LOCAL_EMBEDDING_MODELS:
                self.embedder.embed(["warm up"])  # loaded now: a ready worker is ready
            self.batcher = EmbeddingBatcher(self.embedder, config.models.embedding_batch_size)
        except Exception as exc:  # said by ready(), as a message, not a remote traceback
            named = isinstance(exc, FlexMatchError)
            self.error = str(exc) if named else f"{type(exc).__name__}: {exc}"
        ingest = config.ingest
        memory = ingest.parse_memory_mb
        # the worker's parse and fetch processes start from a fork server: a forked one
        # would hold the worker's connections to Ray open (a worker killed while it
        # parses would not be seen dead until the parse ended) and inherit its gigabytes
        # of mapped object store, which the memory cap counts
        self.parsers = IsolatedPool(
            workers=ingest.parse_workers,
            timeout=ingest.parse_timeout,
            memory_mb=memory,
            start="forkserver",
        )
        self.fetchers = IsolatedPool(
            workers=ingest.fetch_workers, memory_mb=memory, start="forkserver"
        )
        self._reported = Usage()

    def ready(self) -> WorkerInfo:
        return WorkerInfo(os.getpid(), socket.gethostname(), self.embedding_model, self.error)

    def pid(self) -> int:
        return os.getpid()

    async def isolated(
        self,
        kind: str,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        options: dict[str, Any],
    ) -> Any:
        """``function(*args)`` in one of this worker's parser (``kind`` "parse") or fetcher
        processes, as ``IsolatedPool.run`` runs it; its error handed back as a value."""
        pool = self.parsers if kind == "parse" else self.fetchers
        try:
            return await asyncio.to_thread(pool.run, function, *args, **options)
        except Exception as exc:
            return Raised(portable(exc, str(options.get("label", ""))))

    async def work(self, document: Document) -> WorkResult:
        """Chunk, enrich and embed one document; errors come back as values (a message
        naming the document, as a local run reports it, never a remote traceback)."""
        result = WorkResult()
        try:
            chains = self.chains.get(document.source)
            enriched = await prepare(document, chains, self.batcher.embed, self.config.ingest)
            result.chunks = enriched.chunks
            result.vectors = np.asarray(enriched.vectors, dtype=np.float32)
            result.fingerprint = chains.fingerprint()
        except Exception as exc:
            result.error = portable(exc, document.uri)
        result.usage = self._usage_since_last()
        return result

    def _usage_since_last(self) -> Usage:
        """LLM usage not yet handed back: each answer carries its share, so the driver's
        sum is the workers' total, however their documents overlapped."""
        now = self.llm.usage.model_copy() if self.llm else Usage()
        before, self._reported = self._reported, now
        return now - before


def portable(exc: Exception, uri: str) -> FlexMatchError:
    """An error the driver can raise as a local run would have: FlexMatch's own kept (when
    it pickles), anything else named with its type, as ``Indexer.index`` names it."""
    if isinstance(exc, FlexMatchError):
        with contextlib.suppress(Exception):
            return pickle.loads(pickle.dumps(exc))
        return FlexMatchError(str(exc))
    return FlexMatchError(f"{uri}: {type(exc).__name__}: {exc}")
