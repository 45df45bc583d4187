"""The HTTP API: a FastAPI app over one open knowledge base (``flexmatch serve``).

Modules: ``app`` (the factory), ``auth`` and ``keys`` (who may do what in which tenant),
``jobs`` (background ingest), ``limits`` (body size, rate, query length), ``cache``
(search results), ``writes`` (one write per tenant at a time), ``errors`` (the JSON
error shape), ``routes`` (one module per resource).

Names load on first use, so ``flexmatch keys ...`` never imports FastAPI.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "create_app": "flexmatch.service.app",
    "ApiKey": "flexmatch.service.keys",
    "KeyStore": "flexmatch.service.keys",
    "Limits": "flexmatch.service.limits",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'flexmatch.service' has no attribute '{name}'")
