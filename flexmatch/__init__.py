"""FlexMatch: a question-indexed knowledge base for AI agents."""

from flexmatch.errors import (
    ChainError,
    ConfigError,
    EmbeddingError,
    FlexMatchError,
    LLMError,
    ModelMismatchError,
    ParseError,
    PromptError,
    StoreError,
)
from flexmatch.kb import KnowledgeBase
from flexmatch.models import Chunk, Document, IngestReport, MatchingText, SearchResult, Section

__all__ = [
    "ChainError",
    "Chunk",
    "ConfigError",
    "Document",
    "EmbeddingError",
    "FlexMatchError",
    "IngestReport",
    "KnowledgeBase",
    "LLMError",
    "MatchingText",
    "ModelMismatchError",
    "ParseError",
    "PromptError",
    "SearchResult",
    "Section",
    "StoreError",
]
__version__ = "0.1.0"
