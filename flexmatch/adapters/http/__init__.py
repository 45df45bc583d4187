"""The HTTP API: a FastAPI app over one open knowledge base (``flexmatch serve``).

Modules: ``app`` (the factory), ``auth`` (who may do what in which tenant, from the key),
``jobs`` (background ingest), ``limits`` (body size, rate, query length), ``cache``
(search results), ``writes`` (one write per tenant at a time), ``errors`` (the JSON
error shape), ``routes`` (one module per resource), ``metrics`` (what ``GET /metrics``
reports), ``access`` (the access log and the request metrics), ``logs`` (text or JSON
log lines).

Names load on first use, so importing the package never imports FastAPI.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "create_app": "flexmatch.adapters.http.app",
    "Limits": "flexmatch.adapters.http.limits",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'flexmatch.adapters.http' has no attribute '{name}'")
