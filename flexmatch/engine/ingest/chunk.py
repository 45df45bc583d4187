"""Chunk: a document cut into sections by its source's chunker, bounded and checked."""

from __future__ import annotations

import inspect
from typing import Any

from flexmatch import deadlines
from flexmatch.config import IngestConfig
from flexmatch.engine.chains import Chunker
from flexmatch.engine.ingest.threads import in_ingest_thread, off_loop
from flexmatch.errors import ChainError
from flexmatch.models import Document, Section


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


async def sections_of(document: Document, chunker: Chunker, limits: IngestConfig) -> list[Section]:
    """The chunker's sections of ``document``, bounded and checked: at most
    ``ingest.chunk_timeout`` seconds (a plug-in's chunker runs on a thread of its own, so
    one that hangs holds no ingest thread), at most ``ingest.max_sections`` sections and
    one per 4 characters of text (at least 100), their text at most 8 times the
    document's, and every one a ``Section``. Anything else fails this document, naming
    the chain and what it returned."""
    what = chunker.label

    async def call() -> Any:
        result = chunker.run(document)
        return await result if inspect.isawaitable(result) else result

    timeout = limits.chunk_timeout
    if type(chunker).__module__.split(".")[0] == "flexmatch":
        finished, result = await deadlines.within(off_loop(call()), timeout)
    else:
        finished, result = await deadlines.run_coroutine(call, timeout, "flexmatch-chunker")
    if not finished:
        raise ChainError(
            f"{document.uri}: {what} took longer than {timeout:g}s and was left "
            "(ingest.chunk_timeout)"
        )
    if not isinstance(result, list | tuple):
        raise ChainError(
            f"{document.uri}: {what} returned {_short(result)}, not a list of sections"
        )
    return await in_ingest_thread(_checked_sections, document, result, what, limits)


def _checked_sections(
    document: Document, result: list[Any] | tuple[Any, ...], what: str, limits: IngestConfig
) -> list[Section]:
    """``sections_of``'s checks of a chunker's output (a pass over the whole text and every
    section: on an ingest thread)."""
    size = len(document.text)
    cap = min(limits.max_sections, max(100, size // 4))
    if len(result) > cap:
        raise ChainError(
            f"{document.uri}: {what} returned {len(result):,} sections for a {size:,}-character "
            f"text, over the cap of {cap:,} (ingest.max_sections, and at most one section per "
            "4 characters)"
        )
    wrong = [(i, s) for i, s in enumerate(result) if not isinstance(s, Section)]
    if wrong:
        index, first = wrong[0]
        raise ChainError(
            f"{document.uri}: {what} returned {len(wrong):,} of {len(result):,} sections that "
            f"are not Section objects (the first, at {index}: {type(first).__name__} "
            f"{_short(first)})"
        )
    total = sum(len(section.text) for section in result)
    if total > max(8 * size, 100_000):
        raise ChainError(
            f"{document.uri}: {what} returned {total:,} characters of sections for a "
            f"{size:,}-character text (at most 8 times the text)"
        )
    return list(result)
