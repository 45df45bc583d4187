"""``flexmatch serve``: open the knowledge base once, warm it up, and run uvicorn."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from flexmatch import KnowledgeBase, StoreError
from flexmatch.adapters.http.limits import Limits

_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


class EscapingFormatter(logging.Formatter):
    """Log lines with client-sent text escaped: a control character (NUL, ESC, CR…) in a
    file name or URL is written as ``\\xNN``, never raw into the log."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def install_logging(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(EscapingFormatter("%(levelname)s:     %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


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

    install_logging(log_level)
    with KnowledgeBase.open(kb_dir) as kb:
        app = create_app(kb, limits=limits)
        app.state.service.probe_store()  # a store held by another process fails here, clearly
        if app.state.service.readiness.store_error:
            raise StoreError(app.state.service.readiness.store_error)
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False)
        uvicorn.Server(config).run()
