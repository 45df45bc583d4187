"""Packing text into chunks within a token budget, with overlap (shared by the chunkers)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flexmatch.models import Element, Location, SectionPart
from flexmatch.text import count_tokens, split_sentences, split_words

# Bumped when what the built-in chunkers produce changes (2: chunks carry their location,
# an empty heading is kept, merged code names its symbols; 3: a long table is cut between
# rows with its header row repeated; 4: a new page, slide or sheet starts a new chunk, a
# chunk over a page break says where each part of its text is; 5: a chunk names the
# section it is in where its format has no finer place, and a code definition is matched
# with its module's path and what its module's header says of it): stored documents are
# stale and ``reindex`` (or the next ingest) writes them again, instead of old chunks
# staying as they were with no location.
REVISION = 5


def with_revision(definition: dict[str, Any]) -> dict[str, Any]:
    """A built-in chunker's definition, with the revision of its output."""
    return {**definition, "revision": REVISION}


class BudgetParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(400, ge=20, le=8000)
    overlap_tokens: int = Field(50, ge=0)

    @model_validator(mode="after")
    def _overlap_below_budget(self) -> BudgetParams:
        if self.overlap_tokens >= self.max_tokens:
            raise ValueError("overlap_tokens must be smaller than max_tokens")
        return self


def pack(pieces: list[str], max_tokens: int, overlap_tokens: int) -> list[str]:
    """Pack text pieces into chunks within the budget, repeating a tail as overlap.

    A piece over budget is split into sentences (and an overlong sentence into word
    windows); sentences of one piece stay on one line, pieces are separated by a blank line.
    """
    return [packed.text for packed in pack_spans(pieces, max_tokens, overlap_tokens)]


class Packed(NamedTuple):
    """One chunk ``pack_spans`` made: its text, the indexes of the first and last piece it
    holds text of, and which piece each stretch of its text comes from (``(start, end,
    piece)``, ``start:end`` a slice of ``text``)."""

    text: str
    first: int
    last: int
    stretches: list[tuple[int, int, int]]


def pack_spans(
    pieces: list[str],
    max_tokens: int,
    overlap_tokens: int,
    *,
    breaks: Collection[int] = (),
    joins: Collection[int] = (),
) -> list[Packed]:
    """``pack``, each chunk saying which pieces its text comes from (an overlap counts as
    the pieces it was taken from), so a chunk can say where it is.

    A piece in ``breaks`` starts a new chunk, with no overlap carried over it (the first
    piece of another page: a chunk over both would be cited by both). A piece in
    ``joins`` continues the piece before it (a paragraph the page break cut in two): it
    is packed with it as one paragraph, and is never a break."""
    units: list[tuple[str, bool, int]] = []  # (text, starts a new paragraph, piece)
    for index, piece in enumerate(pieces):
        if count_tokens(piece) <= max_tokens:
            units.append((piece, index not in joins, index))
            continue
        first = index not in joins
        for sentence in split_sentences(piece):
            parts = (
                [sentence]
                if count_tokens(sentence) <= max_tokens
                else split_words(sentence, max_tokens, overlap_tokens)
            )
            for part in parts:
                units.append((part, first, index))
                first = False
    chunks: list[Packed] = []
    current = ""
    used = 0
    stretches: list[tuple[int, int, int]] = []
    previous = -1  # the piece of the last unit
    for text, new_paragraph, index in units:
        cost = count_tokens(text)
        if current and index != previous and index in breaks and index not in joins:
            chunks.append(_packed(current, stretches))
            current, used, stretches = "", 0, []
        elif current and used + cost > max_tokens:
            chunks.append(_packed(current, stretches))
            tail = _overlap_tail(current, overlap_tokens)
            stretches = _tail_stretches(current, tail, stretches)
            current, used = tail, count_tokens(tail)
            if used + cost > max_tokens:
                current, used, stretches = "", 0, []
            new_paragraph = False
        separator = ("\n\n" if new_paragraph else " ") if current else ""
        begin = len(current) + len(separator)
        current = f"{current}{separator}{text}"
        stretches.append((begin, len(current), index))
        used += cost
        previous = index
    if current:
        chunks.append(_packed(current, stretches))
    return chunks


def _packed(text: str, stretches: list[tuple[int, int, int]]) -> Packed:
    held = [piece for _, _, piece in stretches]
    return Packed(text, min(held), max(held), list(stretches))


def _tail_stretches(
    text: str, tail: str, stretches: list[tuple[int, int, int]]
) -> list[tuple[int, int, int]]:
    """The stretches of an overlap ``tail`` (the last sentences of ``text``, rejoined):
    those of the end of ``text`` it was taken from, moved to the start."""
    if not tail:
        return []
    cut = max(0, len(text) - len(tail))
    moved = [
        (max(start, cut) - cut, min(end - cut, len(tail)), piece)
        for start, end, piece in stretches
        if end > cut
    ]
    return moved or [(0, len(tail), stretches[-1][2])]


def place(location: Location | None) -> tuple[object, ...] | None:
    """The page, slide or sheet ``location`` is on (None: not known): text of two places
    is cited by both, so a chunk holds one, save for a paragraph continued over a page
    break (``continues``)."""
    if location is None:
        return None
    where = (location.page, location.page_end, location.slide, location.slide_end, location.sheet)
    return where if any(value is not None for value in where) else None


def continues(previous: Element, element: Element) -> bool:
    """True when ``element`` is the rest of ``previous``'s paragraph on the next page: it
    starts in lower case after a paragraph that stops mid-sentence on the page before."""
    before, after = previous.location, element.location
    if before is None or after is None or before.page is None or after.page is None:
        return False
    return (
        previous.kind in ("paragraph", "list_item")
        and element.kind == "paragraph"
        and after.page == (before.page_end or before.page) + 1
        and element.text[:1].islower()
        and not previous.text.rstrip().endswith((".", "!", "?", ":"))
    )


def pack_elements(
    elements: list[Element], max_tokens: int, overlap_tokens: int
) -> list[tuple[str, Location | None, list[SectionPart]]]:
    """``elements`` packed into chunks, each with its location and, when it holds text of
    more than one place (a paragraph continued over a page break), where each part of
    its text is. A new page, slide or sheet starts a new chunk: merged with its
    neighbours, a short page (a letter, a small table) would be cited by their pages too."""
    breaks: set[int] = set()
    joins: set[int] = set()
    for index in range(1, len(elements)):
        before, element = elements[index - 1], elements[index]
        one, other = place(before.location), place(element.location)
        if continues(before, element):
            joins.add(index)
        elif one is not None and other is not None and one != other:
            breaks.add(index)
    texts = [element.text for element in elements]
    packed = pack_spans(texts, max_tokens, overlap_tokens, breaks=breaks, joins=joins)
    return [(chunk.text, *_located(chunk, elements)) for chunk in packed]


def _located(chunk: Packed, elements: list[Element]) -> tuple[Location | None, list[SectionPart]]:
    """A packed chunk's location, and its parts when its text is in more than one place."""
    where = Location.spanning(e.location for e in elements[chunk.first : chunk.last + 1])
    places = {place(elements[piece].location) for _, _, piece in chunk.stretches}
    if len(places) < 2:
        return where, []
    parts: list[SectionPart] = []
    for start, end, piece in chunk.stretches:
        location = elements[piece].location
        if location is None:
            continue
        if parts and parts[-1].location == location:
            parts[-1] = SectionPart(start=parts[-1].start, end=end, location=location)
        else:
            parts.append(SectionPart(start=start, end=end, location=location))
    return where, parts


def line_locations(
    text: str, pieces: list[str], location: Location | None
) -> list[Location | None]:
    """Where each of ``pieces`` (consecutive runs of ``text``'s lines, as ``split_lines``
    cuts them) is, when ``location`` gives the file line of ``text``'s first line."""
    if location is None or location.line_start is None:
        return [location] * len(pieces)
    found: list[Location | None] = []
    position = 0
    counted, breaks = 0, 0  # line breaks before ``counted``: a running count (linear)
    for piece in pieces:
        at = text.find(piece, position)
        if at < 0:
            found.append(location)
            continue
        breaks += text.count("\n", counted, at)
        counted = at
        first = location.line_start + breaks
        last = first + piece.count("\n")
        found.append(location.model_copy(update={"line_start": first, "line_end": last}))
        position = at + len(piece)
    return found


def split_table(text: str, max_tokens: int) -> list[tuple[str, int, int]]:
    """A table (Markdown rows ``a | b``, one per line) over the budget, cut between rows
    with its first (header) row repeated at the top of every piece, so each piece still
    says what its columns are. Each piece comes with the indexes of the first and last
    row it holds (the repeated header not counted after the first piece). A header over
    half the budget is not repeated (it would crowd out the rows); a row that does not
    fit with it is cut into word windows."""
    rows = text.split("\n")
    header = rows[0]
    repeat = len(rows) > 1 and count_tokens(header) <= max_tokens // 2
    top = [header] if repeat else []  # what every piece starts with
    start_used = count_tokens(header) if repeat else 0
    pieces: list[tuple[str, int, int]] = []
    current, used, first = list(top), start_used, 0
    for index in range(1 if repeat else 0, len(rows)):
        row, cost = rows[index], count_tokens(rows[index])
        if used + cost > max_tokens and len(current) > len(top):
            pieces.append(("\n".join(current), first, index - 1))
            current, used, first = list(top), start_used, index
        if used + cost <= max_tokens:
            current.append(row)
            used += cost
            continue
        for part in split_words(row, max_tokens - used, 0):  # one row alone is over budget
            pieces.append(("\n".join([*top, part]), first, index))
        current, used, first = list(top), start_used, index + 1
    if len(current) > len(top):
        pieces.append(("\n".join(current), first, len(rows) - 1))
    return pieces


def table_locations(
    text: str, spans: list[tuple[int, int]], location: Location | None
) -> list[Location | None]:
    """Where each piece of a table cut by ``split_table`` is: its rows (a sheet or CSV
    table, ``location.row_start`` being the header's row) or its lines in the file (a
    Markdown table, whose delimiter row ``|---|`` follows the header); else the table's
    own location (a PDF page)."""
    if location is None:
        return [None] * len(spans)
    count = text.count("\n") + 1
    found: list[Location | None] = []
    for first, last in spans:
        update: dict[str, int] = {}
        if location.row_start is not None:
            update = {"row_start": location.row_start + first, "row_end": location.row_start + last}
        elif (start := location.line_start) is not None and location.line_end is not None:
            extra = location.line_end - start + 1 - count
            if extra in (0, 1):  # one line per row, plus the delimiter row of Markdown
                update = {
                    "line_start": start + first + (extra if first else 0),
                    "line_end": start + last + (extra if last else 0),
                }
        found.append(location.model_copy(update=update) if update else location)
    return found


def _overlap_tail(text: str, overlap_tokens: int) -> str:
    """The last whole sentences of ``text`` that fit in ``overlap_tokens``."""
    if overlap_tokens <= 0:
        return ""
    tail: list[str] = []
    used = 0
    for sentence in reversed(split_sentences(text)):
        cost = count_tokens(sentence)
        if used + cost > overlap_tokens:
            break
        tail.insert(0, sentence)
        used += cost
    return " ".join(tail)


def line_costs(lines: list[str]) -> list[float]:
    """How bad a cut before each line is, from its indentation: statements of an outer
    block are the cheapest places, a blank line just before one cheaper still, and a line
    that closes a bracket the dearest."""
    costs: list[float] = []
    for line in lines:
        stripped = line.lstrip()
        indent = len(line.expandtabs(4)) - len(stripped.expandtabs(4))
        costs.append(indent + (1000 if stripped[:1] in (")", "]", "}") else 0))
    return blank_lines_cheaper(lines, costs)


def blank_lines_cheaper(lines: list[str], costs: list[float]) -> list[float]:
    """A blank line costs a little less than the line after it (cut at a paragraph of code)."""
    result = list(costs)
    following = 1000.0
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip():
            following = result[i]
        else:
            result[i] = following - 0.5
    return result


def split_lines(text: str, max_tokens: int, costs: list[float] | None = None) -> list[str]:
    """Code (or any text whose lines matter) in pieces within the budget, its lines kept
    as they are. Each piece ends at the cheapest line break of its second half (``costs``,
    one per line: how bad a cut before that line is; by default ``line_costs``), so pieces
    break between statements; a single line over the budget is cut into word windows."""
    lines = text.split("\n")
    costs = line_costs(lines) if costs is None else costs
    tokens = [count_tokens(line) for line in lines]
    pieces: list[str] = []
    start = 0
    while start < len(lines):
        end, used = start, 0
        while end < len(lines) and used + tokens[end] <= max_tokens:
            used += tokens[end]
            end += 1
        if end == len(lines):
            pieces.append("\n".join(lines[start:]))
            break
        if end == start:  # one line alone is over the budget
            pieces.extend(split_words(lines[start], max_tokens, 0))
            start += 1
            continue
        low, filled = start + 1, tokens[start]
        while low < end and filled < max_tokens // 2:
            filled += tokens[low]
            low += 1
        cut = min(range(low, end + 1), key=lambda k: (costs[k], -k))
        pieces.append("\n".join(lines[start:cut]))
        start = cut
    return [piece.strip("\n") for piece in pieces if piece.strip()]
