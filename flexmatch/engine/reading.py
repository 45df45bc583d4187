"""Reading what a search found: a document's outline, part of it (a section, pages, lines,
a chunk with its neighbours), an exact or regex search of the stored text (``grep``), and
a search's results expanded to their section or neighbours (``expand``: the parts ``read``
takes, read the same way).

Every read goes through the access rules here, once for every interface: ``outline`` and
``read`` take the document as ``StoredDocuments.get`` serves it (one the principal may not
read is not found, in the words a missing one is), and ``grep`` reads only the points the
principal's access filter lets through, so a hidden document adds neither a hit nor a
count. All of it works on the stored chunks, the text a search result cites."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import regex
from pydantic import BaseModel, ValidationError

from flexmatch.access import Principal, access_filter
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.points import MATCH, MatchPayload, search_filters
from flexmatch.errors import DocumentNotFoundError, QueryError
from flexmatch.models import (
    ChunkView,
    DocumentDetail,
    ExpandedContext,
    ExpandMode,
    GrepHit,
    GrepRequest,
    GrepResult,
    Location,
    Outline,
    OutlineEntry,
    ReadChunk,
    Reading,
    ReadRequest,
    SearchResult,
    cite,
)
from flexmatch.models.reading import GREP_SECONDS, MAX_READ_CHARS, SECTION_SEPARATOR
from flexmatch.text import count_tokens

Request = TypeVar("Request", bound=BaseModel)
LINE_CHARS = 300  # a hit's line, cut around the match beyond this


def checked(model: type[Request], values: dict[str, Any], code: str) -> Request:
    """``values`` as ``model``, or a ``QueryError`` naming each one at fault in one line."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = []
        for item in exc.errors(include_url=False):
            where = ".".join(str(part) for part in item["loc"])
            message = str(item["msg"]).removeprefix("Value error, ")
            problems.append(f"'{where}': {message}" if where else message)
        raise QueryError(code, "; ".join(problems)) from None


Detail = Callable[[str, str, Principal | None], DocumentDetail]


class DocumentReader:
    """``outline``, ``read`` and ``grep`` over one knowledge base's stored documents:
    ``detail`` is how a document is served (``StoredDocuments.get``: not found for one the
    principal may not read), ``registry`` the store's records (for ``grep``)."""

    def __init__(self, detail: Detail, registry: Callable[[], DocumentRegistry]) -> None:
        self.detail = detail
        self.registry = registry

    def outline(self, tenant: str, document_id: str, principal: Principal | None) -> Outline:
        detail = self.detail(tenant, document_id, principal)
        record = detail.document
        return Outline(
            document_id=record.id,
            title=record.title,
            uri=record.uri,
            source=record.source,
            chunks=len(detail.chunks),
            location=Location.spanning(c.location for c in detail.chunks),
            headings=_headings(detail.chunks),
        )

    def read(
        self, tenant: str, document_id: str, principal: Principal | None, **part: Any
    ) -> Reading:
        """``part``: ``ReadRequest``'s fields (checked here, for every interface)."""
        request = checked(ReadRequest, part, "invalid_read")
        detail = self.detail(tenant, document_id, principal)
        return _reading(detail, _part(detail, request))

    def expand(
        self,
        tenant: str,
        principal: Principal | None,
        results: list[SearchResult],
        mode: ExpandMode,
        budget: int,
        min_tokens: int,
    ) -> list[SearchResult]:
        """``results`` with their sections or neighbours (``expanded``), read from their
        own documents as ``principal`` may read them in ``tenant`` (the hits came from
        there, so nothing else is read)."""

        def detail(document_id: str) -> DocumentDetail | None:
            try:
                return self.detail(tenant, document_id, principal)
            except DocumentNotFoundError:  # removed since the search
                return None

        return expanded(detail, results, mode, budget, min_tokens)

    def grep(self, tenant: str, principal: Principal | None, **search: Any) -> GrepResult:
        """``search``: ``GrepRequest``'s fields (checked here, for every interface)."""
        request = checked(GrepRequest, search, "invalid_pattern")
        pattern = _compiled(request)
        filters = {"record": MATCH, **search_filters(request.filters), **access_filter(principal)}
        registry = self.registry()
        points = registry.visible(tenant, registry.store.scroll(tenant, filters))
        carriers = [
            MatchPayload.model_validate(p.payload) for p in points if "content" in p.payload
        ]
        carriers.sort(key=lambda c: (c.source, c.uri, c.document_id, c.chunk_index))
        hits: list[GrepHit] = []
        stopped: str | None = None
        deadline = time.monotonic() + GREP_SECONDS
        for chunk in carriers:
            try:
                found = list(_matches(pattern, chunk, deadline))
            except TimeoutError:
                stopped = "time"
                break
            hits += found[: request.limit - len(hits)]
            if len(found) and len(hits) >= request.limit:
                stopped = "limit"
                break
        return GrepResult(
            pattern=request.pattern,
            regex=request.regex,
            hits=hits,
            documents=len({h.document_id for h in hits}),
            truncated=stopped is not None,
            stopped=stopped,
        )


# -- outline --------------------------------------------------------------------------
def _headings(chunks: list[ChunkView]) -> list[OutlineEntry]:
    """Each heading path's first appearance, in order, with the chunks under it."""
    entries: dict[tuple[str, ...], OutlineEntry] = {}
    spans: dict[tuple[str, ...], list[Location | None]] = {}
    for chunk in chunks:
        for depth in range(1, len(chunk.heading_path) + 1):
            path = tuple(chunk.heading_path[:depth])
            entry = entries.get(path)
            if entry is None:
                entry = entries[path] = OutlineEntry(
                    heading=path[-1],
                    level=depth,
                    section=SECTION_SEPARATOR.join(path),
                    chunk_start=chunk.index,
                    chunk_end=chunk.index,
                )
            entry.chunk_end = chunk.index
            spans.setdefault(path, []).append(chunk.location)
    for path, entry in entries.items():
        entry.location = Location.spanning(spans[path])
    return list(entries.values())


# -- read -----------------------------------------------------------------------------
def _part(detail: DocumentDetail, request: ReadRequest) -> list[ChunkView]:
    """The chunks of the part ``request`` names, in order (``QueryError``: none such)."""
    chunks = detail.chunks
    name = detail.document.id
    if request.section is not None:
        wanted = _section_path(chunks, request.section)
        if wanted is None:
            raise QueryError(
                "no_such_part",
                f"document '{name}' has no section '{request.section}' (its outline lists them)",
            )
        return _under(chunks, wanted)
    for field, start, end, words in (
        ("pages", "page", "page_end", "pages"),
        ("lines", "line_start", "line_end", "lines"),
    ):
        span: tuple[int, int] | None = getattr(request, field)
        if span is None:
            continue
        known = [(c, _range(c.location, start, end)) for c in chunks]
        found = [c for c, r in known if r is not None and r[0] <= span[1] and span[0] <= r[1]]
        if not found:
            ranges = [r for _, r in known if r is not None]
            has = (
                f"it has {words} {min(r[0] for r in ranges)}-{max(r[1] for r in ranges)}"
                if ranges
                else f"its {words} are not known: read it by section or chunk"
            )
            raise QueryError(
                "no_such_part",
                f"document '{name}' has no text on {words} {span[0]}-{span[1]} ({has})",
            )
        return found
    if request.chunk is not None:
        indexes = [c.index for c in chunks]
        if request.chunk not in indexes:
            held = f"0-{max(indexes)}" if indexes else "none"
            raise QueryError(
                "no_such_part",
                f"document '{name}' has no chunk {request.chunk} (its chunks: {held})",
            )
        first, last = request.chunk - request.before, request.chunk + request.after
        return [c for c in chunks if first <= c.index <= last]
    return chunks


def _under(chunks: list[ChunkView], wanted: list[str]) -> list[ChunkView]:
    """The chunks under the (folded) heading path ``wanted``: a section's chunks."""
    return [c for c in chunks if _folded(c.heading_path[: len(wanted)]) == wanted]


def _folded(path: Iterable[str]) -> list[str]:
    return [" ".join(part.split()).casefold() for part in path]


def _section_path(chunks: list[ChunkView], section: str) -> list[str] | None:
    """The heading path ``section`` names: a path as the outline gives it (``A › B``,
    or with ``>``), else the first heading of that name; None when there is none."""
    parts = _folded(regex.split(r"\s*[›>]\s*", section.strip()))
    for chunk in chunks:
        if _folded(chunk.heading_path[: len(parts)]) == parts:
            return parts
    for chunk in chunks:
        folded = _folded(chunk.heading_path)
        if parts[-1] in folded:
            return folded[: folded.index(parts[-1]) + 1]
    return None


def _range(location: Location | None, start: str, end: str) -> tuple[int, int] | None:
    first = getattr(location, start, None) if location is not None else None
    if first is None:
        return None
    return first, getattr(location, end) or first


def _reading(detail: DocumentDetail, part: list[ChunkView]) -> Reading:
    """``part``'s chunks up to ``MAX_READ_CHARS`` (the first one always, cut if need be)."""
    record = detail.document
    read: list[ReadChunk] = []
    room = MAX_READ_CHARS
    for chunk in part:
        if len(chunk.content) > room and read:
            break
        read.append(
            ReadChunk(
                index=chunk.index,
                heading_path=chunk.heading_path,
                location=chunk.location,
                cite=cite(record.uri, record.title, chunk.location),
                content=chunk.content[:room],
            )
        )
        room -= len(chunk.content)
        if room <= 0:
            break
    remaining = len(part) - len(read)
    cut = bool(read) and len(read[-1].content) < len(part[len(read) - 1].content)
    return Reading(
        document_id=record.id,
        title=record.title,
        uri=record.uri,
        chunks=read,
        truncated=remaining > 0 or cut,
        next_chunk=part[len(read)].index if remaining else None,
        remaining=remaining,
    )


# -- expand ---------------------------------------------------------------------------
def expanded(
    detail: Callable[[str], DocumentDetail | None],
    results: list[SearchResult],
    mode: ExpandMode,
    budget: int,
    min_tokens: int,
) -> list[SearchResult]:
    """``results`` with the context ``mode`` names where one is wanted: a result whose
    chunk is shorter than ``min_tokens``, or whose section (document and heading path)
    holds another result. Its context is the part ``read`` gives (the section; the chunk
    with one neighbour either side), grown outward from the hit, one chunk at a time, while
    every context of the answer together stays within ``budget`` tokens (a chunk without a
    heading has no section to show: its neighbours are). A context never
    repeats text an earlier result shows: it stops at a chunk already shown, and a later
    result whose chunk it took in says so (``shown_in``). ``detail(document_id)``: the
    document as the searcher may read it (None: not found); read once a document."""
    if mode == "none" or not results:
        return results
    sections: dict[tuple[str, tuple[str, ...]], int] = {}
    for r in results:  # a document without headings is one section
        key = (r.document_id, tuple(r.heading_path))
        sections[key] = sections.get(key, 0) + 1
    details: dict[str, DocumentDetail | None] = {}
    shown: dict[tuple[str, int], int] = {}  # (document, chunk index) → rank that shows it
    room = budget
    out: list[SearchResult] = []
    for rank, result in enumerate(results, start=1):
        place = (result.document_id, result.chunk_index)
        holder = shown.get(place)
        if holder is not None:
            out.append(result.model_copy(update={"context": _shown_in(out[holder - 1], holder)}))
            continue
        shown[place] = rank
        wanted = count_tokens(result.content) < min_tokens or (
            sections.get((result.document_id, tuple(result.heading_path)), 0) > 1
        )
        if not wanted:
            out.append(result)
            continue
        if result.document_id not in details:
            details[result.document_id] = detail(result.document_id)
        found = details[result.document_id]
        context = _context(found, result, mode, room, shown, rank) if found else None
        if context is not None:
            room -= context.tokens
        out.append(result.model_copy(update={"context": context}) if context else result)
    return out


def _context(
    detail: DocumentDetail,
    result: SearchResult,
    mode: ExpandMode,
    room: int,
    shown: dict[tuple[str, int], int],
    rank: int,
) -> ExpandedContext | None:
    """The hit's context within ``room`` tokens, its chunks marked shown; None when the
    stored document no longer holds the hit's chunk or nothing around it fits."""
    own = next((c for c in detail.chunks if c.id == result.chunk_id), None)
    if own is None:  # written again since the search: the hit's chunk is gone
        return None
    section = mode == "section" and bool(own.heading_path)
    if section:
        pool = _under(detail.chunks, _folded(own.heading_path))
    else:
        pool = _part(detail, ReadRequest(chunk=own.index, before=1, after=1))
    at = pool.index(own)
    first = last = at
    texts = {at: own.content}

    def fits(i: int) -> bool:
        if not 0 <= i < len(pool) or (result.document_id, pool[i].index) in shown:
            return False
        trial = {**texts, i: pool[i].content}
        return count_tokens(_joined([trial[k] for k in sorted(trial)])) <= room

    grew = True
    while grew:
        grew = False
        for step in (last + 1, first - 1):  # after first: what a short chunk introduces
            if fits(step):
                texts[step] = pool[step].content
                first, last = min(first, step), max(last, step)
                grew = True
    if first == last:  # nothing around it, or nothing that fits
        return None
    chunks = pool[first : last + 1]
    for chunk in chunks:
        shown[(result.document_id, chunk.index)] = rank
    text = _joined([c.content for c in chunks])
    record = detail.document
    return ExpandedContext(
        kind="section" if section else "neighbours",
        text=text,
        chunk_start=chunks[0].index,
        chunk_end=chunks[-1].index,
        section=SECTION_SEPARATOR.join(own.heading_path) if section else None,
        cite=cite(record.uri, record.title, Location.spanning(c.location for c in chunks)),
        tokens=count_tokens(text),
    )


def _shown_in(holder: SearchResult, rank: int) -> ExpandedContext | None:
    """The context of a result whose chunk ``holder`` (of ``rank``) already shows."""
    held = holder.context
    if held is None:  # two results of one chunk: the first shows it
        return None
    return held.model_copy(update={"text": "", "tokens": 0, "shown_in": rank})


OVERLAP_CHARS = 2_000  # how far back the next chunk's overlap with the last is looked for


def _joined(texts: list[str]) -> str:
    """Consecutive chunks as one text, the overlap the chunker repeats at the start of a
    chunk (its last sentences carried over) kept once."""
    out = texts[0] if texts else ""
    for text in texts[1:]:
        out += "\n\n" + text[_overlap(out, text) :]
    return out


def _overlap(before: str, text: str) -> int:
    """How many leading characters of ``text`` ``before`` already ends with (0: none)."""
    tail = before[-OVERLAP_CHARS:]
    probe = text[:20]
    if len(probe) < 20:
        return 0
    at = tail.find(probe)
    while at >= 0:
        if text.startswith(tail[at:]):
            return len(tail) - at
        at = tail.find(probe, at + 1)
    return 0


# -- grep -----------------------------------------------------------------------------
def _compiled(request: GrepRequest) -> regex.Pattern[str]:
    flags = regex.IGNORECASE if request.ignore_case else 0
    source = request.pattern if request.regex else regex.escape(request.pattern)
    try:
        return regex.compile(source, flags | regex.MULTILINE)
    except regex.error as exc:
        raise QueryError(
            "invalid_pattern", f"the pattern '{request.pattern}' is not a valid regex: {exc}"
        ) from None


def _matches(pattern: regex.Pattern[str], chunk: MatchPayload, deadline: float) -> list[GrepHit]:
    """The lines of ``chunk`` that ``pattern`` matches, one hit a line (``TimeoutError``
    past ``deadline``: the regex module stops a runaway pattern mid-match)."""
    text = chunk.content
    hits: list[GrepHit] = []
    seen_lines: set[int] = set()
    timeout = deadline - time.monotonic()
    if timeout <= 0:
        raise TimeoutError
    for match in pattern.finditer(text, timeout=timeout):
        if match.end() == match.start():
            continue
        line_no = text.count("\n", 0, match.start())
        if line_no in seen_lines:
            continue
        seen_lines.add(line_no)
        begin = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.start())
        line = text[begin : end if end >= 0 else len(text)]
        where = _line_location(chunk.location, line_no)
        hits.append(
            GrepHit(
                document_id=chunk.document_id,
                chunk_id=chunk.chunk_id,
                chunk_index=chunk.chunk_index,
                uri=chunk.uri,
                title=chunk.title,
                source=chunk.source,
                heading_path=chunk.heading_path,
                location=where,
                cite=cite(chunk.uri, chunk.title, where),
                match=match.group()[:LINE_CHARS],
                line=_around(line, match.start() - begin, match.end() - begin),
            )
        )
    return hits


def _line_location(location: Location | None, line_no: int) -> Location | None:
    """The chunk's location narrowed to the hit's line when the chunk's lines are known
    and its text holds exactly those lines."""
    if location is None or location.line_start is None:
        return location
    last = location.line_end or location.line_start
    line = location.line_start + line_no
    if line > last:
        return location
    return location.model_copy(update={"line_start": line, "line_end": line})


def _around(line: str, start: int, end: int) -> str:
    if len(line) <= LINE_CHARS:
        return line
    first = max(0, min(start - LINE_CHARS // 3, len(line) - LINE_CHARS))
    cut = line[first : max(first + LINE_CHARS, end)]
    return ("…" if first else "") + cut + ("…" if first + len(cut) < len(line) else "")
