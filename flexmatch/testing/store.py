"""An in-memory vector store for tests, and a knowledge base that uses it.

``InMemoryStore`` is the real Qdrant server store (``flexmatch.engine.stores.server``)
over qdrant-client's in-process engine (``QdrantClient(":memory:")``): the same
``VectorStore`` protocol, tenant filters, BM25 lexical search, document records and
model checks as a production store, with nothing written to disk and nothing to clean
up. It needs qdrant-client (the ``qdrant`` extra); without it, making one says which
extra to install.

``memory_knowledge_base`` opens a knowledge-base folder (its ``flexmatch.yaml``, chains
and prompts, as a user would have them) on such a store and with ``HashEmbedder``, so a
plug-in's chain or source type can be tested end to end in well under a second::

    from flexmatch.testing import memory_knowledge_base

    def test_my_chain(tmp_path):
        (tmp_path / "notes.md").write_text("The harbour opens at dawn.")
        with memory_knowledge_base(tmp_path / "kb") as kb:
            kb.ingest([tmp_path / "notes.md"])
            assert "dawn" in kb.query("when does the harbour open")[0].content
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from flexmatch.engine.stores.server import ServerStore
from flexmatch.testing.embedder import HashEmbedder

if TYPE_CHECKING:
    from flexmatch.engine.embedders import Embedder
    from flexmatch.knowledge_base import KnowledgeBase

__all__ = ["InMemoryStore", "memory_knowledge_base"]

MEMORY = ":memory:"


class InMemoryStore(ServerStore):
    """A ``VectorStore`` that lives as long as the object: the Qdrant server store on
    qdrant-client's in-process engine. Each instance is a store of its own; data written
    through one is never seen by another."""

    def __init__(self, collection: str = "flexmatch") -> None:
        super().__init__(MEMORY, None, collection)

    def prepare(self, embedding_model: str, dimension: int) -> None:
        # the in-process engine ignores payload indexes and warns so on every creation:
        # true, and nothing a test can act on
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Payload indexes have no effect", UserWarning)
            super().prepare(embedding_model, dimension)

    def __repr__(self) -> str:
        return f"InMemoryStore(collection={self.collection!r})"


def memory_knowledge_base(
    path: str | Path,
    *,
    embedder: Embedder | None = None,
    env: dict[str, str] | None = None,
) -> KnowledgeBase:
    """The knowledge base in ``path`` (its ``flexmatch.yaml``, or all defaults), with its
    store replaced by an in-memory one and its embedding model by ``embedder``
    (a ``HashEmbedder()`` unless given).

    Everything else is the folder's own: chains, prompts, sources, the LLM settings (point
    them at a ``FakeLLMServer``). The store is empty when the knowledge base opens and gone
    when it closes, so use one ``with`` block per test."""
    from flexmatch.config import load_config
    from flexmatch.knowledge_base import KnowledgeBase

    folder = Path(path).expanduser().resolve()
    config = load_config(folder, env)
    store = config.store.model_copy(update={"url": MEMORY, "api_key": None})
    return KnowledgeBase.open(
        folder,
        config=config.model_copy(update={"store": store}),
        env=env,
        embedder=embedder or HashEmbedder(),
    )
