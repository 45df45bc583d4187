"""``code``: one chunk per definition of a source or config file, found by its headings.

The code parser gives every definition a heading at its nesting depth; a chunk's heading
path is the file's path in its folder, then the symbols around it
(``src/app.py › class Server › def start``). A definition over the budget is split between
statements (the cheapest line breaks of its syntax tree, so a piece never stops inside a
call or a string when it can help it), every piece keeping the symbol path; small
neighbours are merged up to ``merge_tokens`` under the path they share, and a merged
chunk's path ends with the names of every symbol it holds (``uuid.py › uuid3, uuid4``),
so none of them is hidden. Prose elements (a document that is not code) are packed as the
``structure`` chunker packs them. Every chunk has its lines in the file as its location.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flexmatch.engine.chains.chunker._budget import (
    blank_lines_cheaper,
    line_costs,
    line_locations,
    pack_elements,
    place,
    split_lines,
    with_revision,
)
from flexmatch.engine.chains.kinds import Chunker
from flexmatch.inputs.parsing.code import GRAMMARS, symbol_name, syntax_tree
from flexmatch.models import Document, Element, Location, Section, SectionPart
from flexmatch.text import count_tokens

_NO_CUT = 1000.0  # a line no statement starts on (inside a call, a string, a closing brace)


class CodeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(400, ge=20, le=8000)
    merge_tokens: int = Field(120, ge=0)  # neighbours merged while together within this

    @model_validator(mode="after")
    def _merge_within_budget(self) -> CodeParams:
        if self.merge_tokens > self.max_tokens:
            raise ValueError("merge_tokens must not exceed max_tokens")
        return self


@dataclass
class _Piece:
    path: list[str]
    text: str
    tokens: int
    whole: bool  # a whole definition (or block of prose): may merge with its neighbours
    location: Location | None = None
    members: list[list[str]] = field(default_factory=list)  # paths merged into this one
    parts: list[SectionPart] = field(default_factory=list)  # when in more than one place


class CodeChunker(Chunker):
    """One chunk per definition, heading path = file path › symbols; long ones split
    between statements, small neighbours merged."""

    Params = CodeParams

    def definition(self) -> dict[str, Any]:
        return with_revision(super().definition())

    async def run(self, document: Document) -> list[Section]:
        root = str(document.metadata.get("path") or document.title or document.uri)
        language = document.metadata.get("language")
        budget = self.params.max_tokens
        pieces: list[_Piece] = []
        headings: list[tuple[int, str]] = []
        prose: list[Element] = []

        def path() -> list[str]:
            return [root, *(text for _, text in headings)]

        def flush_prose() -> None:
            for text, where, parts in pack_elements(prose, budget, 0):
                pieces.append(_Piece(path(), text, count_tokens(text), True, where, parts=parts))
            prose.clear()

        for element in document.elements:
            if element.kind == "title":  # the file itself: back to its top level
                flush_prose()
                headings.clear()
            elif element.kind == "heading":
                flush_prose()
                while headings and headings[-1][0] >= max(1, element.level):
                    headings.pop()
                headings.append((max(1, element.level), element.text))
            elif element.kind == "code":
                flush_prose()
                tokens = count_tokens(element.text)
                if tokens <= budget:
                    pieces.append(_Piece(path(), element.text, tokens, True, element.location))
                    continue
                costs = syntax_costs(element.text, language)
                texts = split_lines(element.text, budget, costs)
                wheres = line_locations(element.text, texts, element.location)
                for text, where in zip(texts, wheres, strict=True):
                    pieces.append(_Piece(path(), text, count_tokens(text), False, where))
            else:
                prose.append(element)
        flush_prose()
        merged = _merge(pieces, self.params.merge_tokens)
        return [
            Section(
                text=piece.text,
                heading_path=_named_path(piece, language),
                location=piece.location,
                parts=piece.parts,
            )
            for piece in merged
        ]


def _named_path(piece: _Piece, language: object) -> list[str]:
    """A merged chunk's path: the scope it was merged under, then the names of the symbols
    it holds below that scope (``uuid.py › uuid3, uuid4``); any other chunk's own path."""
    if not piece.members:
        return piece.path
    depth = len(piece.path)
    labels = list(dict.fromkeys(m[depth] for m in piece.members if len(m) > depth))
    if len(labels) < 2:  # one symbol (and its scope's code): its own heading
        return [*piece.path, *labels]
    grammar = language if isinstance(language, str) and language in GRAMMARS else None
    names = [symbol_name(label, grammar) if grammar else label for label in labels]
    return [*piece.path, ", ".join(names)]


def _merge(pieces: list[_Piece], limit: int) -> list[_Piece]:
    """Whole neighbours joined while together within ``limit``: members of one scope (the
    file, a class) and that scope's own code, under the scope's path. A method is never
    merged with code outside its class."""
    merged: list[_Piece] = []
    scope: list[str] | None = None  # of the last merged piece, once it holds two
    for piece in pieces:
        last = merged[-1] if merged else None
        if (
            last is None
            or not (last.whole and piece.whole)
            or last.tokens + piece.tokens > limit
            or not _one_place(last, piece)
        ):
            merged.append(piece)
            scope = None
            continue
        joined = _joined_scope(last.path, piece.path) if scope is None else scope
        if joined is None or not (piece.path == joined or piece.path[:-1] == joined):
            merged.append(piece)
            scope = None
            continue
        scope = joined
        text, tokens = f"{last.text}\n\n{piece.text}", last.tokens + piece.tokens
        where = Location.spanning([last.location, piece.location])
        members = [*(last.members or [last.path]), piece.path]
        merged[-1] = _Piece(joined, text, tokens, True, where, members)
    return merged


def _one_place(first: _Piece, second: _Piece) -> bool:
    """Two pieces may merge: each is in one place, and it is the same (or not known)."""
    if first.parts or second.parts:
        return False
    one, other = place(first.location), place(second.location)
    return one is None or other is None or one == other


def _joined_scope(first: list[str], second: list[str]) -> list[str] | None:
    """The scope two neighbours share: the first's, when the second is its member or its
    sibling; None when they sit in different scopes."""
    if second == first or second[:-1] == first:  # a class's own code, then its first method
        return first
    if len(first) > 1 and (second[:-1] == first[:-1] or second == first[:-1]):
        return first[:-1]  # two functions; a method, then its class's code again
    return None


def syntax_costs(text: str, language: object) -> list[float]:
    """How bad a cut before each line of ``text`` is: the depth in its syntax tree of the
    outermost statement that starts the line (no statement: a bad place); by indentation
    when the language has no grammar."""
    lines = text.split("\n")
    if not isinstance(language, str) or language not in GRAMMARS:
        return line_costs(lines)
    costs = [_NO_CUT] * len(lines)
    indents = [len(line) - len(line.lstrip()) for line in lines]
    stack = [(syntax_tree(text.encode("utf-8"), language), 0)]
    while stack:
        node, depth = stack.pop()
        row, column = node.start_point
        if node.is_named and row < len(lines) and column <= indents[row] and depth < costs[row]:
            costs[row] = depth
        stack.extend((child, depth + 1) for child in node.children)
    return blank_lines_cheaper(lines, costs)
