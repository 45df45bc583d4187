"""``flexmatch serve``: open the knowledge base once, warm it up, and run uvicorn.

With ``workers > 1`` uvicorn starts that many processes, and each opens the knowledge
base itself (``worker_app``), loads its own embedding model and answers on the shared
port. They agree through the shared state (keys, jobs, cache generations), so they must
all reach one vector store: a Qdrant server (``store.url``), never the embedded store,
which one process holds locked. With the embedded store, ``serve`` claims the knowledge
base before anything else (``claim_store``): a second ``serve`` on it is refused at start,
not after reporting ready.

Connections go through ``connections.GuardedH11Protocol``: a deadline for each request
head and caps on open connections per client address and in total
(``service.connections``), with repeated connection errors logged once per interval.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flexmatch import ConfigError, KBConfig, KnowledgeBase, StoreError, load_config
from flexmatch.adapters.http.connections import (
    ConnectionLimits,
    GuardedH11Protocol,
    install_repeat_filter,
    raise_file_limit,
)
from flexmatch.adapters.http.limits import Limits
from flexmatch.adapters.http.logs import LogFormat, install_logging
from flexmatch.lifecycle import die_with_parent, quiet_collector
from flexmatch.service import SharedState

# how ``serve`` hands its arguments to the worker processes uvicorn spawns
_WORKER_ENV = "FLEXMATCH_SERVE_WORKER"


def check_workers(config: KBConfig, workers: int) -> None:
    """Refuse several workers over a store only one process can open (or that each
    process would hold a private copy of)."""
    if workers <= 1:
        return
    url = config.store.url
    if not url:
        raise ConfigError(
            f"--workers {workers} needs store.url (a Qdrant server): each worker opens the "
            "knowledge base, and the embedded store admits one process"
        )
    if url == ":memory:":
        raise ConfigError(
            f"--workers {workers} with store.url ':memory:' would give each worker its own "
            "empty store: use a Qdrant server"
        )


@contextlib.contextmanager
def claim_store(kb_dir: Path, config: KBConfig) -> Iterator[None]:
    """Hold the embedded store's serve lock for the block (nothing to hold with a Qdrant
    server, which several servers share). The store's own lock is taken only once there
    is a store, so without this a second server on a new knowledge base started,
    reported ready, and then every request waited for the first one and failed. An flock
    ends with its holder (and forked workers let go of it), so a killed server leaves
    nothing to clean up."""
    if config.store.url:
        yield
        return
    store = Path(config.store.path)
    store = store if store.is_absolute() else kb_dir / store
    store.parent.mkdir(parents=True, exist_ok=True)
    lock_path = store.parent / f"{store.name}.serve-lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    handle = os.fdopen(fd, "r+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        by = f" (pid {holder})" if holder.isdigit() else ""
        raise StoreError(
            f"the knowledge base at {kb_dir} is already served by another FlexMatch "
            f"process{by}: stop it first, or share a Qdrant server (store.url) to run several"
        ) from None
    except OSError as exc:
        handle.close()
        raise StoreError(f"cannot lock {lock_path}: {exc}") from exc
    try:
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()


SWITCH_INTERVAL = 0.001  # seconds


def serve(
    kb_dir: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: Limits | None = None,
    log_level: str = "info",
    log_format: LogFormat = "text",
    workers: int = 1,
) -> None:
    """Serve the HTTP API until interrupted; the store stays open for the whole run.
    Uvicorn gets no logging config of its own: its lines go through ``install_logging``'s
    handler, in ``log_format``, like every other line."""
    import uvicorn

    from flexmatch.adapters.http.app import create_app

    install_logging(log_level, log_format)
    # a thread waiting for the GIL asks for it after 1 ms, not 5: the event loop answers
    # between an ingest's pure-Python steps instead of waiting out several of them
    sys.setswitchinterval(SWITCH_INTERVAL)
    limits = limits or Limits()
    file_limit = raise_file_limit()
    if workers > 1:
        config = load_config(kb_dir)
        check_workers(config, workers)
        connections = ConnectionLimits.from_config(config.service.connections, file_limit)
        shared = SharedState.for_kb(kb_dir, config)
        shared.check()  # tables created once, before the workers race to; a bad URL fails here
        shared.close()
        os.environ[_WORKER_ENV] = json.dumps(
            {
                "kb": str(kb_dir),
                "limits": dataclasses.asdict(limits),
                "connections": dataclasses.asdict(connections),
                "log_level": log_level,
                "log_format": log_format,
                "supervisor": os.getpid(),
            }
        )
        uvicorn.run(
            "flexmatch.adapters.http.server:worker_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
            log_config=None,
            access_log=False,
            http=f"{GuardedH11Protocol.__module__}:{GuardedH11Protocol.__name__}",
            backlog=connections.backlog,
        )
        return
    kb_dir = kb_dir.expanduser().resolve()
    config = load_config(kb_dir)
    connections = ConnectionLimits.from_config(config.service.connections, file_limit)
    GuardedH11Protocol.configure(connections)
    # claimed first and released last: a server waiting for it never meets the store open
    with claim_store(kb_dir, config), KnowledgeBase.open(kb_dir, config=config) as kb:
        # closed when the app stops: uvicorn re-raises SIGTERM once it has stopped, which
        # ends the process before this block does (the store's socket must go with it)
        app = create_app(kb, limits=limits, close_kb=True)
        quiet_collector()
        app.state.service.shared.check()  # an unreachable state database fails here, clearly
        app.state.service.probe_store()  # a store held by another process fails here, clearly
        if app.state.service.readiness.store_error:
            raise StoreError(app.state.service.readiness.store_error)
        server_config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            log_config=None,
            access_log=False,
            http=GuardedH11Protocol,
            backlog=connections.backlog,
        )
        install_repeat_filter(connections.log_interval)  # after uvicorn set up its loggers
        uvicorn.Server(server_config).run()


def worker_app() -> Any:
    """One worker's app (uvicorn calls this in each process ``serve`` starts); the
    knowledge base is closed when the worker stops."""
    from flexmatch.adapters.http.app import create_app

    settings = json.loads(os.environ[_WORKER_ENV])
    # a killed supervisor takes its workers along, even one killed while this one started
    die_with_parent(settings.get("supervisor", 0))
    install_logging(settings["log_level"], settings.get("log_format", "text"))
    sys.setswitchinterval(SWITCH_INTERVAL)
    connections = ConnectionLimits(**settings["connections"])
    GuardedH11Protocol.configure(connections)
    install_repeat_filter(connections.log_interval)
    kb = KnowledgeBase.open(Path(settings["kb"]))
    app = create_app(kb, limits=Limits(**settings["limits"]), close_kb=True)
    quiet_collector()
    return app
