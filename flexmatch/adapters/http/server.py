"""``flexmatch serve``: open the knowledge base once, warm it up, and run uvicorn."""

from __future__ import annotations

import logging
from pathlib import Path

from flexmatch import KnowledgeBase, StoreError
from flexmatch.adapters.http.limits import Limits


def serve(
    kb_dir: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: Limits | None = None,
    log_level: str = "info",
) -> None:
    """Serve the HTTP API until interrupted; the store stays open for the whole run."""
    import uvicorn

    from flexmatch.adapters.http.app import create_app

    logging.basicConfig(level=log_level.upper(), format="%(levelname)s:     %(message)s")
    with KnowledgeBase.open(kb_dir) as kb:
        app = create_app(kb, limits=limits)
        app.state.service.probe_store()  # a store held by another process fails here, clearly
        if app.state.service.readiness.store_error:
            raise StoreError(app.state.service.readiness.store_error)
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False)
        uvicorn.Server(config).run()
