"""mkdocs hooks: pages generated from the code at build time, so they cannot drift.

``docs/reference/errors.md`` holds ``<!-- error-table -->``; the build replaces it with a
table of every error class, its codes and HTTP status (``flexmatch.errors.by_code``)."""

from __future__ import annotations

from typing import Any

from flexmatch.adapters.http.errors import STATUS_CODES
from flexmatch.errors import FlexMatchError, ServiceError, error_classes, own_codes

ERROR_TABLE = "<!-- error-table -->"
STATUS_TABLE = "<!-- status-table -->"


def _meaning(kind: type[FlexMatchError]) -> str:
    """The first sentence of the class's docstring, on one line."""
    text = " ".join((kind.__doc__ or "").split())
    return text.split(". ", 1)[0].rstrip(".").replace("|", "\\|") + "."


def error_table() -> str:
    """One row per code: the code, the HTTP status a server answers it with, the class
    (and its parent) and what it means."""
    rows = ["| Code | Status | Class | Meaning |", "| --- | --- | --- | --- |"]
    for kind in error_classes():
        parent = kind.__mro__[1].__name__ if kind is not FlexMatchError else "Exception"
        status = "—" if kind is ServiceError else str(kind.status)
        for code in own_codes(kind):
            rows.append(
                f"| `{code}` | {status} | `{kind.__name__}` ({parent}) | {_meaning(kind)} |"
            )
    return "\n".join(rows)


def status_table() -> str:
    """The code a server answers with when the HTTP layer itself refuses a request."""
    rows = ["| Status | Code |", "| --- | --- |"]
    rows += [f"| {status} | `{code}` |" for status, code in sorted(STATUS_CODES.items())]
    return "\n".join(rows)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return markdown.replace(ERROR_TABLE, error_table()).replace(STATUS_TABLE, status_table())
