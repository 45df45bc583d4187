"""Enrich: each section made a chunk with its matching texts and qualifying text."""

from __future__ import annotations

import asyncio
from typing import Any

from flexmatch.engine.chains import MatchingTextChain, QualifyingTextChain
from flexmatch.engine.chains.sources import SourceChains
from flexmatch.engine.ingest.threads import in_ingest_thread, off_loop
from flexmatch.models import Chunk, Document, MatchingText, Section


async def _per_section(
    chain: MatchingTextChain | QualifyingTextChain, sections: list[Section], document: Document
) -> list[Any]:
    """``chain.run`` for every section: concurrently on this loop for an LLM chain (its
    calls are I/O, batched across chunks), all in one worker thread for one without."""
    if chain.uses_llm:
        return list(await asyncio.gather(*(chain.run(s, document) for s in sections)))

    async def each() -> list[Any]:
        return [await chain.run(section, document) for section in sections]

    return await off_loop(each())


async def enrich(document: Document, sections: list[Section], chains: SourceChains) -> list[Chunk]:
    """Each of the document's sections as a chunk with its matching and qualifying texts."""
    matching, qualifying = await asyncio.gather(
        _per_section(chains.matching_text, sections, document),
        _per_section(chains.qualifying_text, sections, document),
    )
    return await in_ingest_thread(_chunks, document, sections, matching, qualifying)


def _chunks(
    document: Document, sections: list[Section], matching: list[Any], qualifying: list[Any]
) -> list[Chunk]:
    """The chunks of the sections and their chains' answers (tens of thousands of models
    for a big document: built on an ingest thread, never on the loop)."""
    return [
        Chunk(
            id=f"{document.id}#{index}",
            document_id=document.id,
            index=index,
            text=section.text,
            heading_path=section.heading_path,
            location=section.location,
            qualifying_text=qualifying[index],
            matching_texts=located(section, matching[index]),
        )
        for index, section in enumerate(sections)
    ]


def located(section: Section, texts: list[MatchingText]) -> list[MatchingText]:
    """``texts`` each with its own location, when the section is in more than one place
    (a paragraph over a page break) and the text is found in it (``Section.locate``): a
    result that matched it cites its page, not the chunk's pages."""
    if not section.parts:
        return texts
    return [
        text if text.location else text.model_copy(update={"location": section.locate(text.text)})
        for text in texts
    ]


def known_texts(sections: list[Section], chains: SourceChains, document: Document) -> list[str]:
    """The matching texts known before any LLM answers, once each, in order."""
    known = (m.text for s in sections for m in chains.matching_text.known_texts(s, document))
    return list(dict.fromkeys(known))
