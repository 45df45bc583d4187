"""A result cites the page of the text that matched: a chunk over a page break keeps
where each of its sentences is, through ingest, the store and a query (with the
deterministic ``HashEmbedder``, so this runs in the quick tier; ``tests/test_citations.py``
does the same with the real model, OCR and slides)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from flexmatch import KnowledgeBase
from flexmatch.chains import ChainContext, MatchingTextChain, build_chain
from flexmatch.config import ChainRef
from flexmatch.engine.ingest.enrich import located
from flexmatch.engine.points import MatchPayload
from flexmatch.models import Document, Element, Location, Section, SectionPart
from flexmatch.testing import HashEmbedder
from tests.pdfs import COLD_STORE, pdf_of

DOCK = "The loading dock of the cold store takes four refrigerated lorries at a time"


def test_a_result_cites_the_page_of_the_sentence_that_matched(tmp_path: Path) -> None:
    pdf = tmp_path / "cold-store.pdf"
    pdf.write_bytes(pdf_of(COLD_STORE))
    with KnowledgeBase.open(tmp_path / "kb", embedder=HashEmbedder(), env={}) as kb:
        assert kb.ingest([pdf]).documents == 1
        first = kb.query(DOCK, top_n=1)[0]
        assert first.location == Location(page=1, page_end=2)  # the paragraph's pages
        assert first.matched_location == Location(page=2)
        assert first.cite == "cold-store.pdf p. 2"
        item = json.loads(kb.format(DOCK, [first], "json"))["results"][0]
        assert (item["cite"], item["matched_location"]) == ("cold-store.pdf p. 2", {"page": 2})
        opening = kb.query("Harbour Supplies opens a cold store in Delfzijl", top_n=1)[0]
        assert opening.chunk_id == first.chunk_id and opening.cite == "cold-store.pdf p. 1"
        letter = kb.query("Tilburg warehouse will close for good on 14 March", top_n=1)[0]
        assert letter.cite == "cold-store.pdf p. 3" and letter.matched_location is None


def test_sentences_of_a_section_over_two_pages_are_located() -> None:
    one, two = "Dear Ms. Patel, the old store closes in March.", "The new one opens in May."
    text = f"{one} {two}"
    section = Section(
        text=text,
        heading_path=["Letter"],
        location=Location(page=1, page_end=2),
        parts=[
            SectionPart(start=0, end=len(one), location=Location(page=1)),
            SectionPart(start=len(one) + 1, end=len(text), location=Location(page=2)),
        ],
    )
    document = Document(
        id="d", uri="/r.pdf", source="s", title="Report",
        elements=[Element(kind="paragraph", text=text)],
    )  # fmt: skip
    sentences = build_chain(ChainRef(chain="sentences"), MatchingTextChain, ChainContext())
    texts = located(section, asyncio.run(sentences.run(section, document)))
    assert [(t.kind, t.location) for t in texts] == [
        ("sentence", Location(page=1)),
        ("sentence", Location(page=2)),
        ("content", None),  # the whole chunk: its own location says it
    ]
    in_one_place = section.model_copy(update={"parts": []})
    plain = located(in_one_place, asyncio.run(sentences.run(in_one_place, document)))
    assert len(plain) == 3 and all(t.location is None for t in plain)


def test_a_point_without_a_matched_location_is_stored_and_read_as_before() -> None:
    payload = {
        "document_id": "d", "chunk_id": "d#0", "source": "s", "version": "v",
        "uri": "/docs/report.pdf", "location": {"page": 1, "page_end": 2},
    }  # fmt: skip
    before = MatchPayload.model_validate(payload)
    assert before.result(0.5).cite == "report.pdf pp. 1-2"
    assert before.matching_text().location is None
    narrowed = MatchPayload.model_validate({**payload, "matched_location": {"page": 2}})
    assert narrowed.result(0.5).cite == "report.pdf p. 2"
    assert narrowed.matching_text().location == Location(page=2)
