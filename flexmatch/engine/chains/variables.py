"""The variables a chain hands to its prompt template, built in one place."""

from __future__ import annotations

from typing import Any

from flexmatch.models import Document, MatchingText, Section

SECTION_VARIABLES = frozenset({"chunk", "document", "source", "params"})


def section_variables(section: Section, document: Document) -> dict[str, Any]:
    return {
        "chunk": {"text": section.text, "heading_path": section.heading_path},
        "document": {
            "id": document.id,
            "title": document.title,
            "uri": document.uri,
            "text": document.text,
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
