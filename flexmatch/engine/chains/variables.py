"""The variables a chain hands to its prompt template, built in one place."""

from __future__ import annotations

import re
import weakref
from typing import Any

from flexmatch.inputs.parsing.code import GRAMMARS, symbol_name
from flexmatch.models import Document, MatchingText, Section
from flexmatch.text import lead_sentence

_BLANK_LINE = re.compile(r"\n\s*\n")
MODULE_MENTIONS = 2  # paragraphs of a module's header about one definition, at most
MENTION_CHARS = 400  # of each

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
        self._header: list[str] | None = None

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
    def header(self) -> list[str]:
        """A code file's module header (its code before the first definition: docstring,
        imports, ``__all__``) in paragraphs, whitespace collapsed; [] for any other."""
        if self._header is None:
            document = self._document()
            self._header = []
            if document is not None and document.metadata.get("language") in GRAMMARS:
                code: list[str] = []
                for element in document.elements[1:]:
                    if element.kind != "code":
                        break
                    code.append(element.text)
                paragraphs = _BLANK_LINE.split("\n\n".join(code))
                self._header = [" ".join(p.split()) for p in paragraphs if p.strip()]
        return self._header

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
    """``Title › Heading › Sub-heading``: the place of a section in its document. A code
    file is named by its path in the folder walked (``email/message.py › class Message ›
    def get_content_charset``): its package says what a definition belongs to."""
    parts = [document.title, *section.heading_path]
    path = document.metadata.get("path")
    if document.metadata.get("language") in GRAMMARS and isinstance(path, str) and path:
        parts = [path, *(part for part in parts if part != document.title)]
    seen: list[str] = []
    for part in parts:
        if part and part not in seen:
            seen.append(part)
    return " › ".join(seen)


def module_mentions(document: Document, section: Section) -> list[str]:
    """What a code file's module header says of the definition ``section`` holds: its
    paragraphs that name it as a call (``unified_diff(a, b): For two lists of strings,
    return a delta in unified diff format.``). A module's docstring often sums up each of
    its functions; matched only in the header, those words made the header outrank the
    function they describe."""
    language = document.metadata.get("language")
    if language not in GRAMMARS or len(section.heading_path) < 2:
        return []
    header = _facts(document).header
    if not header:
        return []
    label = section.heading_path[-1]
    names = [symbol_name(part.strip(), str(language)) for part in label.split(",")]
    calls = [re.compile(rf"(?<![\w.]){re.escape(name)}\s*\(") for name in names if name]
    found = [p for p in header if any(call.search(p) for call in calls)]
    return [p[:MENTION_CHARS] for p in found[:MODULE_MENTIONS]]


def content_text(section: Section, document: Document) -> MatchingText:
    """The chunk itself as a matching text, prefixed with where it sits (and, for a code
    definition, with what its module's header says of it: ``module_mentions``)."""
    label = heading_label(document, section)
    parts = [label, *module_mentions(document, section), section.text]
    return MatchingText(text="\n".join(part for part in parts if part), kind="content")
