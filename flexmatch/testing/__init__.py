"""Test helpers for FlexMatch and its plug-ins.

- ``FakeLLMServer``: a real, deterministic OpenAI- and Cohere-shaped server on 127.0.0.1.
- ``HashEmbedder``: a deterministic ``Embedder`` (hashed words, no model).
- ``InMemoryStore``: the real Qdrant store on qdrant-client's in-process engine.
- ``memory_knowledge_base``: a knowledge-base folder opened on both.

Importing this package loads the standard library only; the store helpers import the
store code (and need qdrant-client, the ``qdrant`` extra) when first used, so a test
module can import what it needs from here without paying for the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flexmatch.testing.embedder import HashEmbedder

if TYPE_CHECKING:
    from flexmatch.testing.fake_llm import FakeLLMServer, RecordedRequest
    from flexmatch.testing.store import InMemoryStore, memory_knowledge_base

__all__ = [
    "FakeLLMServer",
    "HashEmbedder",
    "InMemoryStore",
    "RecordedRequest",
    "memory_knowledge_base",
]

_LAZY = {
    # lazy too: a test that wants only the embedder does not load the server
    "FakeLLMServer": "flexmatch.testing.fake_llm",
    "RecordedRequest": "flexmatch.testing.fake_llm",
    "InMemoryStore": "flexmatch.testing.store",
    "memory_knowledge_base": "flexmatch.testing.store",
}


def __getattr__(name: str) -> Any:
    """The lazily loaded helpers, imported on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flexmatch.testing' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)
