"""Distributed ingest on Ray: the expensive work fans out, the writes stay in one place.

A run hands two kinds of work to a small set of Ray actors (``ray_worker.IngestWorker``),
each of which builds the sources' chains, the LLM client and the embedding model once:

1. *parse and fetch*: the source's reader runs here, as in a local run (listing, version
   hints, stored copies, ids, per-input failures), but its isolated processes are on
   the workers (``RayPool``): each file is parsed, each web page fetched, in one of a
   worker's own killable processes, under the same deadline and memory cap.
2. *enrich and embed*: a document that is neither unchanged nor a duplicate (checked
   here, against the store, so an unchanged document costs no worker time and no LLM
   call) is chunked, enriched by the LLM chains and embedded on a worker, which hands
   back its chunks and vectors.

This process (the driver) is the single writer, whatever the store: it runs the same
``Indexer`` as a local ingest, with ``RayFanOut.work`` as its work step, so a document
is begun, written and committed by exactly the code of a local run (repair, dedup,
near-duplicate checks and per-document failures included), and document ids, versions
and point ids come out the same (they are derived from the text, the chains and the
positions, never from where the work ran). With a Qdrant server, workers could write
their own points, but the commit protocol needs begin → write → commit as one writer's
sequence per document, the near-duplicate check reads what was committed before, and
the writes are a small part of the time (the LLM calls and the embedding are the rest).

A worker that dies (killed, out of memory) is restarted by Ray. The documents it held
are tried again, each on a worker of its own, and only a death while alone counts
against a document's ``retries``: a poison document fails by itself, the others beside
it are indexed. A document whose retries run out is reported failed, and nothing of it
is written: the driver writes only whole results.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from flexmatch.config import KBConfig
from flexmatch.engine.chains.sources import SourceChains
from flexmatch.engine.ingest.embed import Enriched
from flexmatch.engine.ingest.ray_worker import IngestWorker, Raised, WorkerInfo, WorkResult
from flexmatch.errors import ConfigError, FlexMatchError, ParseError
from flexmatch.extras import require
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.models import Document, Usage

NAMESPACE = "flexmatch"
START_TIMEOUT = 300.0  # seconds for every worker to import, load its model and say so
# Ray restarts a worker that died as often as it takes: the deaths are bounded by the
# documents' retries (a document is charged only for a death while it ran alone)
RESTARTS = -1
ALONE_POLL = 0.05  # seconds between looks for a worker to run a suspect document alone
DRAIN_SECONDS = 10.0  # at most, for the calls under way to end once the workers are killed
T = TypeVar("T")


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide a distributed ingest runs.

    ``address``: None starts a Ray cluster on this machine for the run (stopped after
    it); else the address of a running one (``HOST:PORT`` of its head, or ``auto``: the
    one ``ray start`` runs here), joined from this process. A process already connected
    to Ray uses that connection. ``workers``: Ray actors, one CPU each. ``retries``: how
    many times a document is tried again after its worker died while it ran alone (a
    death in company costs it nothing: it is tried again alone); a parse or fetch that
    was under way on a worker that died, how many times Ray sends it again.
    """

    address: str | None = None
    workers: int = 2
    retries: int = 2

    @classmethod
    def chosen(cls, ray: bool | str, workers: int, retries: int) -> RayOptions | None:
        """The options an ingest's ``ray=`` asks for: ``False``, none (a local run);
        ``True`` or ``""``, a cluster started here; else the address of a running one."""
        if ray is False:
            return None
        address = ray if isinstance(ray, str) and ray else None
        return cls(address=address, workers=workers, retries=retries)

    def check(self) -> None:
        if self.workers < 1:
            raise ConfigError(f"a distributed ingest needs at least 1 worker, not {self.workers}")
        if self.retries < 0:
            raise ConfigError(f"retries must be 0 or more, not {self.retries}")


class RayFanOut:
    """The workers of one distributed ingest run, and the two kinds of work handed to them.

    Work goes to the least busy worker that is up; one that died is left out until it
    answers again (Ray restarts it), and if every worker is gone for good, the documents
    left fail with a message that says so.
    """

    def __init__(
        self,
        ray: Any,
        actors: list[Any],
        infos: list[WorkerInfo],
        options: RayOptions,
        concurrency: int,
        usage: Usage | None,
        embedding_model: str,
    ) -> None:
        self.ray = ray
        self.actors = actors
        self.infos = infos
        self.options = options
        self.concurrency = concurrency  # documents in flight across all workers
        self.usage = usage  # the driver's LLM usage: the workers' calls are added to it
        self.embedding_model = embedding_model
        self._busy = [0] * len(actors)
        self._down: set[int] = set()  # died; left out until they answer again
        self._gone: set[int] = set()  # died for good
        self._held: set[int] = set()  # held for a document that runs alone
        self._closing = False  # the run is ending: no new calls
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()
        self._probes: set[asyncio.Task[None]] = set()

    @classmethod
    @contextlib.asynccontextmanager
    async def start(
        cls,
        options: RayOptions,
        *,
        kb_dir: Path,
        config: KBConfig,
        env: dict[str, str] | None,
        llm_cache: Path | None,
        usage: Usage | None,
        embedding_model: str,
    ) -> AsyncIterator[RayFanOut]:
        """Connect to (or start) the cluster, start the workers, and stop them after."""
        options.check()
        ray = require("ray", "ray", "a distributed ingest on Ray")
        started = await asyncio.to_thread(_connect, ray, options)
        fanout: RayFanOut | None = None
        with _sigterm_exits(started):
            try:
                actors, infos = await asyncio.to_thread(
                    _launch, ray, options, kb_dir, config, env, llm_cache
                )
                try:
                    for info in infos:
                        if info.embedding_model != embedding_model:
                            raise ConfigError(
                                f"the Ray workers embed with '{info.embedding_model}' (models."
                                f"embedding) but this knowledge base embeds with "
                                f"'{embedding_model}'"
                            )
                    concurrency = options.workers * config.ingest.document_concurrency
                    fanout = cls(ray, actors, infos, options, concurrency, usage, embedding_model)
                    yield fanout
                finally:
                    if fanout is not None:
                        fanout.close()
                    for actor in actors:
                        with contextlib.suppress(Exception):
                            ray.kill(actor)
                    if fanout is not None:  # no call may be under way once Ray is shut down
                        await fanout.drained(DRAIN_SECONDS)
            finally:
                if started:
                    await asyncio.to_thread(ray.shutdown)

    # -- phase 1: parse and fetch ------------------------------------------------------
    def pool(self, kind: str) -> RayPool:
        """Isolated processes on the workers, for a reader: "parse" or "fetch"."""
        return RayPool(self, kind)

    def isolated(
        self,
        kind: str,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        options: dict[str, Any],
    ) -> Any:
        """``function(*args)`` in a worker's isolated process; called from the reading
        threads (it waits for the answer). A worker's death is the input's error."""
        error: type[FlexMatchError] = options.get("error", ParseError)
        label = str(options.get("label", ""))
        index = self._take()
        if index is None:
            raise error(self._stopped(label) if self._closing else self._all_gone(label))
        try:
            ref = self._call(index, "isolated", kind, function, args, options)
            if ref is None:
                raise error(self._stopped(label))
            outcome = self.ray.get(ref)
        except self.ray.exceptions.RayActorError:
            if self._closing:
                raise error(self._stopped(label)) from None
            asyncio.run_coroutine_threadsafe(self._probe(index), self._loop)
            raise error(self._died(label, str(options.get("what", "parsing")))) from None
        finally:
            self._give(index)
        if isinstance(outcome, Raised):
            raise outcome.error
        return outcome

    # -- phase 2: enrich and embed -------------------------------------------------------
    async def work(self, document: Document, chains: SourceChains) -> Enriched:
        """``Indexer``'s work step: one document enriched and embedded on a worker.

        A worker that dies takes every document it held with it, and Ray cannot tell
        which one killed it. So a document that died in company is tried again on a
        worker of its own (drained of other work first), at no charge; only a death while
        alone counts against its ``retries``. A poison document fails by itself, and the
        innocent ones in flight beside it are indexed."""
        alone = False
        deaths = 0  # while alone
        while True:
            index = await self._take_alone() if alone else self._take()
            if index is None:
                uri = document.uri
                raise FlexMatchError(self._stopped(uri) if self._closing else self._all_gone(uri))
            was_alone = alone
            try:
                ref = self._call(index, "work", document, retries=0)
                if ref is None:
                    raise FlexMatchError(self._stopped(document.uri))
                result: WorkResult = await ref
                break
            except self.ray.exceptions.RayActorError:
                if self._closing:
                    raise FlexMatchError(self._stopped(document.uri)) from None
                self._probe_soon(index)
                deaths += was_alone
                if deaths > self.options.retries:
                    raise FlexMatchError(self._died(document.uri, "indexing")) from None
                alone = True
            finally:
                self._give(index, alone=was_alone)
        if self.usage is not None:
            self.usage.add(result.usage)
        if result.error is not None:
            raise result.error
        if result.fingerprint != chains.fingerprint():
            raise ConfigError(
                f"{document.uri}: the Ray worker on {self.infos[index].node} built source "
                f"'{document.source}' with other chains than this process (the knowledge "
                f"base's chains/ and prompts/ must be at the same path on every node)"
            )
        return Enriched(chunks=result.chunks, vectors=result.vectors.tolist())

    # -- workers -------------------------------------------------------------------------
    def _call(self, index: int, method: str, *args: Any, retries: int | None = None) -> Any:
        """``actors[index].method.remote(*args)``, or None once the run is closing: no call
        reaches Ray after it is shut down (Ray's C++ layer ends the process when one does)."""
        with self._lock:
            if self._closing:
                return None
            bound = getattr(self.actors[index], method)
            if retries is not None:
                bound = bound.options(max_task_retries=retries)
            return bound.remote(*args)

    def close(self) -> None:
        """The run is ending: no new call goes to a worker from now on."""
        with self._lock:
            self._closing = True

    async def drained(self, seconds: float) -> None:
        """Wait (at most ``seconds``) until no call to a worker is under way."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self._lock:
                if not any(self._busy):
                    return
            await asyncio.sleep(ALONE_POLL)

    def _take(self) -> int | None:
        """The least busy worker that is up and not held for a document running alone
        (or, if there is none, one that is up, or restarting); None once closing."""
        with self._lock:
            if self._closing:
                return None
            alive = [i for i in range(len(self.actors)) if i not in self._gone]
            up = [i for i in alive if i not in self._down]
            left = [i for i in up if i not in self._held] or up or alive
            if not left:
                return None
            index = min(left, key=lambda i: self._busy[i])
            self._busy[index] += 1
            return index

    async def _take_alone(self) -> int | None:
        """A worker held for one document: no new work goes to it, and it is taken once
        it is up and has finished what it held (None: every worker is gone)."""
        index: int | None = None
        while True:
            with self._lock:
                alive = [i for i in range(len(self.actors)) if i not in self._gone]
                if not alive or self._closing:
                    if index is not None:
                        self._held.discard(index)
                    return None
                if index is not None and index in self._gone:
                    self._held.discard(index)
                    index = None
                if index is None:
                    free = [i for i in alive if i not in self._held]
                    if free:
                        index = min(free, key=lambda i: (i in self._down, self._busy[i]))
                        self._held.add(index)
                if index is not None and index not in self._down and self._busy[index] == 0:
                    self._busy[index] += 1
                    return index
            await asyncio.sleep(ALONE_POLL)

    def _give(self, index: int, *, alone: bool = False) -> None:
        with self._lock:
            self._busy[index] -= 1
            if alone:
                self._held.discard(index)

    def _probe_soon(self, index: int) -> None:
        task = self._loop.create_task(self._probe(index))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    async def _probe(self, index: int) -> None:
        """A worker that died is left out until it answers again; if Ray gave up on it
        (its restarts are spent), for good."""
        with self._lock:
            self._down.add(index)
        ref = self._call(index, "ready")
        if ref is None:
            return
        try:
            await ref
        except self.ray.exceptions.RayActorError:
            with self._lock:
                self._gone.add(index)
            return
        with self._lock:
            self._down.discard(index)

    def _died(self, uri: str, doing: str) -> str:
        return (
            f"{uri}: the Ray worker {doing} it died and its retries ({self.options.retries}) "
            "ran out; nothing of it was written"
        )

    def _stopped(self, uri: str) -> str:
        return f"{uri}: the run was stopped before a Ray worker finished it"

    def _all_gone(self, uri: str) -> str:
        return f"{uri}: every Ray ingest worker died; nothing of it was written"


TERMINATED = 128 + signal.SIGTERM  # the exit status of a run stopped by SIGTERM


@contextlib.contextmanager
def _sigterm_exits(connected: bool) -> Iterator[None]:
    """While this process is connected to Ray, SIGTERM ends the run the way Python exits
    (``SystemExit``), so the workers are killed and the cluster this run started is shut
    down; a second SIGTERM ends the process at once. Without this, the handler Ray's C++
    layer installs prints a stack dump to the terminal and leaves the cluster's helper
    processes behind. Only the main thread can set a handler; elsewhere nothing changes."""
    if not connected or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.stderr.write("flexmatch: stopped by SIGTERM; stopping the Ray workers\n")
        raise SystemExit(TERMINATED)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _connect(ray: Any, options: RayOptions) -> bool:
    """Join or start a cluster; False when this process was already connected to one."""
    import logging

    if ray.is_initialized():
        return False
    settings: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.ERROR,
        "log_to_driver": False,
        "namespace": NAMESPACE,
    }
    try:
        if options.address:
            ray.init(address=options.address, **settings)
        else:  # a cluster of this machine for this run, one CPU per worker
            ray.init(address="local", num_cpus=options.workers, **settings)
    except Exception as exc:
        if not options.address:
            raise ConfigError(f"could not start a local Ray cluster: {exc}") from None
        raise ConfigError(
            f"could not join the Ray cluster at {options.address}: {exc} (a cluster with "
            "token authentication, Ray's default, is joined with RAY_AUTH_MODE=token and "
            "its token in ~/.ray/auth_token or RAY_AUTH_TOKEN)"
        ) from None
    return True


def _launch(
    ray: Any,
    options: RayOptions,
    kb_dir: Path,
    config: KBConfig,
    env: dict[str, str] | None,
    llm_cache: Path | None,
) -> tuple[list[Any], list[WorkerInfo]]:
    """Start the workers and wait until each has loaded its models."""
    run = uuid.uuid4().hex[:8]
    remote = ray.remote(IngestWorker)
    actors = [
        remote.options(
            name=f"ingest-{run}-{i}",
            namespace=NAMESPACE,
            num_cpus=1,
            max_restarts=RESTARTS,
            max_task_retries=options.retries,
        ).remote(str(kb_dir), config, env, str(llm_cache) if llm_cache else None, os.getcwd())
        for i in range(options.workers)
    ]
    try:
        infos: list[WorkerInfo] = ray.get([a.ready.remote() for a in actors], timeout=START_TIMEOUT)
    except ray.exceptions.GetTimeoutError:
        for actor in actors:
            ray.kill(actor)
        cpus = ray.cluster_resources().get("CPU", 0)
        raise ConfigError(
            f"{options.workers} Ray ingest workers did not start within {START_TIMEOUT:g}s "
            f"(each takes one CPU; the cluster has {cpus:g})"
        ) from None
    except ray.exceptions.RayActorError as exc:
        for actor in actors:
            ray.kill(actor)
        raise ConfigError(f"a Ray ingest worker could not start: {exc}") from None
    errors = [info.error for info in infos if info.error]
    if errors:
        for actor in actors:
            ray.kill(actor)
        raise ConfigError(f"a Ray ingest worker could not start: {errors[0]}")
    return actors, infos


class RayPool(IsolatedPool):
    """An ``IsolatedPool`` whose processes are on the Ray workers: a reader given one
    parses (or fetches) there, each call in one of a worker's own isolated processes,
    with the same deadline, memory cap and errors as in this process."""

    def __init__(self, fanout: RayFanOut, kind: str) -> None:
        super().__init__(workers=len(fanout.actors))
        self.fanout = fanout
        self.kind = kind

    def run(
        self,
        function: Callable[..., T],
        *args: Any,
        label: str,
        timeout: float | None = None,
        what: str = "parsing",
        setting: str = "ingest.parse_timeout",
        error: type[FlexMatchError] = ParseError,
    ) -> T:
        options = {
            "label": label,
            "timeout": timeout,
            "what": what,
            "setting": setting,
            "error": error,
        }
        return self.fanout.isolated(self.kind, function, args, options)

    def close(self) -> None:
        """Nothing here to stop: the workers' processes end with the workers."""
