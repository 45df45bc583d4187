"""One exception tree for everything FlexMatch raises on purpose.

FlexMatchError
├── ConfigError        a config or chain file is wrong (names the file and field)
│   ├── SourceChoiceError  a caller named an unknown or unfitting source
│   ├── FilterError    a search filter names a field or value that cannot be filtered on
│   └── QueryError     a query is empty or too long
├── MissingExtraError  an optional dependency is not installed (names the extra)
├── ChainError         a chain failed at run time (names the chain, its kind, the source
│   │                  and the input)
│   └── PromptError    a prompt template failed to load or render
├── ParseError         a document could not be read (names the file)
│   ├── UnsupportedFormatError
│   ├── EmptyDocumentError
│   ├── EncryptedDocumentError
│   └── DocumentTooLargeError
├── LLMError           an LLM call failed after its retries
├── EmbeddingError     the embedding model could not be loaded or used
├── DocumentNotFoundError  no such document in this tenant
├── WebImportError     a URL was refused or could not be fetched
├── PayloadError       a document holds what the store could not read back (names the field)
├── WriteConflictError another writer replaced a document while it was being indexed
├── KeyRequestError    an API key could not be created or changed as asked
├── ToolCallError      an agent's tool call was malformed (unknown tool, bad arguments)
├── ServiceError       a FlexMatch server refused a request, or could not be reached
└── StoreError         the vector store refused an operation
    └── ModelMismatchError  the store was built with another embedding model
"""

from __future__ import annotations


class FlexMatchError(Exception):
    """Root of every error FlexMatch raises on purpose; the message is user-facing."""


class ConfigError(FlexMatchError):
    """A configuration or chain definition is invalid."""


class SourceChoiceError(ConfigError):
    """A caller named a source that does not exist or does not fit; ``code`` says which."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class FilterError(ConfigError):
    """A search filter names a field that is not filterable, or a value of the wrong type."""


class QueryError(ConfigError):
    """A query is empty or over the length limit; ``code`` says which."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class MissingExtraError(FlexMatchError):
    """An optional dependency is missing; the message names the extra that installs it."""


class ChainError(FlexMatchError):
    """A chain failed while running."""


class PromptError(ChainError):
    """A prompt template could not be loaded or rendered."""


class ParseError(FlexMatchError):
    """A document could not be parsed; the message names the file."""


class UnsupportedFormatError(ParseError):
    """No parser handles this kind of file."""


class EmptyDocumentError(ParseError):
    """The document parsed but holds no text."""


class EncryptedDocumentError(ParseError):
    """The document is encrypted or password protected."""


class DocumentTooLargeError(ParseError):
    """The document is over the configured (or the hard) byte cap."""


class LLMError(FlexMatchError):
    """An LLM call failed after all retries."""


class EmbeddingError(FlexMatchError):
    """The embedding model could not be loaded or called."""


class DocumentNotFoundError(FlexMatchError):
    """No document with that id in this tenant (whether or not another tenant has one)."""


class WebImportError(FlexMatchError):
    """A URL was refused by the safety rules or could not be fetched."""


class PayloadError(FlexMatchError):
    """A document or point holds a value the store could not read back (too deep, too
    large, or not JSON); the message names the document and the field."""


class WriteConflictError(FlexMatchError):
    """Another writer replaced a document while this one indexed it: this version is not
    committed, the other writer's stands."""


class KeyRequestError(FlexMatchError):
    """An API key could not be created or changed as asked (bad tenant, permission or id)."""


class ToolCallError(FlexMatchError):
    """A tool call the model got wrong: unknown tool, bad or missing arguments."""


class ServiceError(FlexMatchError):
    """A FlexMatch server (``Client``) answered an error no other class names (a bad key,
    a missing permission, overload) or could not be reached; ``status`` is the HTTP
    status (0: no answer) and ``code`` the server's error code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class StoreError(FlexMatchError):
    """The vector store refused an operation."""


class ModelMismatchError(StoreError):
    """The knowledge base was indexed with a different embedding model."""
