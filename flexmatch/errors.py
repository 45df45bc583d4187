"""One exception tree for everything FlexMatch raises on purpose.

FlexMatchError
├── ConfigError        a config or chain file is wrong (names the file and field)
│   ├── SourceChoiceError  a caller named an unknown or unfitting source
│   ├── FilterError    a search filter names a field or value that cannot be filtered on
│   ├── QueryError     a query is empty or too long
│   └── DepthError     a search asked for a depth that is not ``fast`` or ``deep``
├── MissingExtraError  an optional dependency is not installed (names the extra)
├── ChainError         a chain failed at run time (names the chain, its kind, the source
│   │                  and the input)
│   └── PromptError    a prompt template failed to load or render
├── ParseError         a document could not be read (names the file)
│   ├── UnsupportedFormatError
│   │   └── NotProseError  text that is no prose (PostScript, a symbol table, minified code)
│   ├── EmptyDocumentError
│   ├── EncryptedDocumentError
│   └── DocumentTooLargeError
├── LLMError           an LLM call failed after its retries
├── EmbeddingError     the embedding model could not be loaded or used
├── DocumentNotFoundError  no such document in this tenant
├── WebImportError     a URL was refused or could not be fetched
├── PayloadError       a document holds what the store could not read back (names the field)
├── WriteConflictError another writer replaced a document while it was being indexed
├── WriteRefusedError  this writer may not write that document, or may not set its access
├── KeyRequestError    an API key could not be created or changed as asked
├── FeedbackRateError  a principal gave more feedback than its per-minute limit
├── ToolCallError      an agent's tool call was malformed (unknown tool, bad arguments)
├── ServiceError       a FlexMatch server refused a request, or could not be reached
└── StoreError         the vector store refused an operation
    └── ModelMismatchError  the store was built with another embedding model

Each class carries the stable ``code`` and the HTTP ``status`` a server answers it
with (``{"error": {"code": ..., "message": ...}}``); a class with several codes lists
them in ``codes`` and each error says its own. ``by_code`` is the one table both
directions are read from: the server's answer for an error, and the class ``Client``
raises for an answer. docs/reference/errors.md is generated from it.
"""

from __future__ import annotations

import functools
from typing import ClassVar, Self


class FlexMatchError(Exception):
    """Root of every error FlexMatch raises on purpose; the message is user-facing."""

    code: str = "internal_error"
    status: int = 500
    codes: ClassVar[tuple[str, ...]] = ()
    """Set on a class whose errors carry one of several codes (``code`` says which)."""

    @classmethod
    def from_answer(cls, code: str, message: str) -> Self:
        """The error an answer with ``code`` and ``message`` stands for (``Client``)."""
        return cls(message)


class ConfigError(FlexMatchError):
    """A configuration or chain definition is invalid."""

    code = "invalid_request"
    status = 422


class SourceChoiceError(ConfigError):
    """A caller named a source that does not exist or does not fit; ``code`` says which."""

    codes = ("unknown_source", "no_records_source", "not_a_records_source")

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    @classmethod
    def from_answer(cls, code: str, message: str) -> Self:
        return cls(code, message)


class FilterError(ConfigError):
    """A search filter names a field that is not filterable, or a value of the wrong type."""

    code = "invalid_filter"


class QueryError(ConfigError):
    """A query is empty or over the length limit, a grep's pattern is not a valid regular
    expression, a read names a part of a document it does not have, or a search an
    ``expand`` mode there is not; ``code`` says which."""

    codes = (
        "empty_query",
        "query_too_long",
        "empty_text",
        "text_too_long",
        "invalid_pattern",
        "invalid_read",
        "no_such_part",
        "invalid_expand",
    )

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    @classmethod
    def from_answer(cls, code: str, message: str) -> Self:
        return cls(code, message)


class DepthError(ConfigError):
    """A search asked for a depth other than ``fast`` (one search) or ``deep`` (the
    first results seed more searches)."""

    code = "invalid_depth"


class MissingExtraError(FlexMatchError):
    """An optional dependency is missing; the message names the extra that installs it."""

    code = "missing_extra"
    status = 500


class ChainError(FlexMatchError):
    """A chain failed while running."""

    code = "chain_error"
    status = 500


class PromptError(ChainError):
    """A prompt template could not be loaded or rendered."""

    code = "prompt_error"


class ParseError(FlexMatchError):
    """A document could not be parsed; the message names the file."""

    code = "parse_error"
    status = 422


class UnsupportedFormatError(ParseError):
    """No parser handles this kind of file."""

    code = "unsupported_format"


class NotProseError(UnsupportedFormatError):
    """The file is text but no prose to index (PostScript, a symbol table, minified
    code); ``reason`` names which, as a folder walk's skip counts it."""

    code = "not_prose"

    def __init__(self, message: str, reason: str = "not prose") -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[type[NotProseError], tuple[str, str]]:
        return type(self), (str(self), self.reason)  # from a parsing worker, reason kept


class EmptyDocumentError(ParseError):
    """The document parsed but holds no text."""

    code = "empty_document"


class EncryptedDocumentError(ParseError):
    """The document is encrypted or password protected."""

    code = "encrypted_document"


class DocumentTooLargeError(ParseError):
    """The document is over the configured (or the hard) byte cap."""

    code = "document_too_large"


class LLMError(FlexMatchError):
    """An LLM call failed after all retries."""

    code = "llm_error"
    status = 502


class EmbeddingError(FlexMatchError):
    """The embedding model could not be loaded or called."""

    code = "embedding_unavailable"
    status = 503


class DocumentNotFoundError(FlexMatchError):
    """No document with that id in this tenant (whether or not another tenant has one)."""

    code = "not_found"
    status = 404


class WebImportError(FlexMatchError):
    """A URL was refused by the safety rules or could not be fetched."""

    code = "web_import_refused"
    status = 422


class PayloadError(FlexMatchError):
    """A document or point holds a value the store could not read back (too deep, too
    large, or not JSON); the message names the document and the field."""

    code = "unreadable_payload"
    status = 500


class WriteConflictError(FlexMatchError):
    """Another writer replaced a document while this one indexed it: this version is not
    committed, the other writer's stands."""

    code = "write_conflict"
    status = 409


class WriteRefusedError(FlexMatchError):
    """A write this writer may not make: the document id is taken by a document it may
    not read (said the same whoever may read it), or a writer who is not an admin set a
    document's access. Nothing stored changes."""

    code = "write_refused"
    status = 403


class KeyRequestError(FlexMatchError):
    """An API key could not be created or changed as asked (bad tenant, permission or id)."""

    code = "invalid_key_request"
    status = 422


class FeedbackRateError(FlexMatchError):
    """A principal gave more feedback marks in a minute than ``feedback.per_minute``
    allows; nothing of this one was kept. Try again after the minute."""

    code = "feedback_rate_limited"
    status = 429


class ToolCallError(FlexMatchError):
    """A tool call the model got wrong: unknown tool, bad or missing arguments."""

    code = "invalid_tool_call"
    status = 422


class ServiceError(FlexMatchError):
    """A FlexMatch server (``Client``) answered an error no other class names (a bad key,
    a missing permission, overload) or could not be reached; ``status`` is the HTTP
    status (0: no answer) and ``code`` the server's error code, or one of ``codes``: the
    client's own (no answer, a deadline, an answer over its size cap, an answer that is
    not a FlexMatch server's, a job still running)."""

    status = 0
    codes = (
        "unreachable",
        "deadline_exceeded",
        "answer_too_large",
        "unexpected_answer",
        "http_error",
        "job_timeout",
    )

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code

    @classmethod
    def from_answer(cls, code: str, message: str) -> Self:
        return cls(0, code, message)


class StoreError(FlexMatchError):
    """The vector store refused an operation."""

    code = "store_unavailable"
    status = 503


class ModelMismatchError(StoreError):
    """The knowledge base was indexed with a different embedding model."""

    code = "model_mismatch"


def error_classes() -> list[type[FlexMatchError]]:
    """Every error class, root first, each before its subclasses, in definition order."""
    found: list[type[FlexMatchError]] = []

    def walk(kind: type[FlexMatchError]) -> None:
        found.append(kind)
        for sub in kind.__subclasses__():
            if sub.__module__ == __name__:
                walk(sub)

    walk(FlexMatchError)
    return found


def own_codes(kind: type[FlexMatchError]) -> tuple[str, ...]:
    """The codes ``kind`` itself declares (none: it answers with an ancestor's)."""
    several: tuple[str, ...] = kind.__dict__.get("codes", ())
    one: str | None = kind.__dict__.get("code")
    return several or ((one,) if one else ())


def code_table(classes: list[type[FlexMatchError]]) -> dict[str, type[FlexMatchError]]:
    """The class of each code ``classes`` declare; a code two of them declare is a
    ``ValueError`` naming both (an answer must say one class)."""
    table: dict[str, type[FlexMatchError]] = {}
    for kind in classes:
        for code in own_codes(kind):
            if code in table:
                raise ValueError(
                    f"error code {code!r} is declared by both {table[code].__name__} "
                    f"and {kind.__name__}"
                )
            table[code] = kind
    return table


@functools.cache
def by_code() -> dict[str, type[FlexMatchError]]:
    """The class of each error code: the one table the server's answers and the client's
    errors are both read from."""
    return code_table(error_classes())
