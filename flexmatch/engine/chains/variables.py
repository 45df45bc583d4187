"""The variables a chain hands to its prompt template, built in one place."""

from __future__ import annotations

import weakref
from typing import Any

from flexmatch.models import Document, MatchingText, Section
from flexmatch.text import lead_sentence

SECTION_VARIABLES = frozenset({"chunk", "document", "source", "params"})


class _DocumentFacts:
    """What the chains read of a whole document, computed once per document: ``Document.text``
    joins every element on each access, and a chain asking it for each of a document's
    chunks made an ingest quadratic in the document's size."""

    def __init__(self, document: Document) -> None:
        self.text = document.text
        self._lead: str | None = None
        self._document = weakref.ref(document)
        self._outline: str | None = None

    @property
    def outline(self) -> str:
        if self._outline is None:
            document = self._document()
            elements = document.elements if document is not None else []
            self._outline = "\n".join(
                "  " * max(e.level - 1, 0) + " ".join(e.text.split())
                for e in elements
                if e.kind == "heading" and e.text.strip()
            )
        return self._outline

    @property
    def lead(self) -> str:
        if self._lead is None:
            self._lead = lead_sentence(self.text)
        return self._lead


# keyed by id(document); an entry goes when its document is collected (the weak
# reference's callback), so nothing here outlives the ingest that read the document
_FACTS: dict[int, tuple[weakref.ref[Document], _DocumentFacts]] = {}


def _facts(document: Document) -> _DocumentFacts:
    key = id(document)
    entry = _FACTS.get(key)
    if entry is not None and entry[0]() is document:
        return entry[1]
    facts = _DocumentFacts(document)
    _FACTS[key] = (weakref.ref(document, lambda _ref: _FACTS.pop(key, None)), facts)
    return facts


def document_text(document: Document) -> str:
    """``document.text``, joined once per document however many chunks ask for it."""
    return _facts(document).text


def document_lead(document: Document) -> str:
    """The document's first prose sentence (``lead_sentence``), found once per document."""
    return _facts(document).lead


def document_outline(document: Document) -> str:
    """The document's headings in reading order, one a line, indented by level: its
    structure without its text (an edit to a section's body leaves it as it was)."""
    return _facts(document).outline


def section_variables(section: Section, document: Document) -> dict[str, Any]:
    return {
        "chunk": {"text": section.text, "heading_path": section.heading_path},
        "document": {
            "id": document.id,
            "title": document.title,
            "uri": document.uri,
            "text": document_text(document),
            "metadata": document.metadata,
        },
        "source": document.source,
    }


def heading_label(document: Document, section: Section) -> str:
    """``Title › Heading › Sub-heading``: the place of a section in its document."""
    parts = [document.title, *section.heading_path]
    seen: list[str] = []
    for part in parts:
        if part and part not in seen:
            seen.append(part)
    return " › ".join(seen)


def content_text(section: Section, document: Document) -> MatchingText:
    """The chunk itself as a matching text, prefixed with where it sits."""
    label = heading_label(document, section)
    return MatchingText(text=f"{label}\n{section.text}" if label else section.text, kind="content")
