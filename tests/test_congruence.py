"""One contract, two implementations: every operation of ``KnowledgeBaseProtocol`` runs on
an embedded ``KnowledgeBase`` and on a ``Client`` of a real server (the FastAPI app under
uvicorn on 127.0.0.1) holding the same data, and the results are compared: ids, order,
scores within a tolerance, document lists and details, counts, and the errors raised for
the same bad input. (The model: qdrant-client's congruence tests, local against remote.)

Both ingest the same files, records and web page. A file ingested in place and a file
uploaded are named differently (a path, a file name), so file documents are paired by
source and title; records and web pages have the same ids on both sides, checked as such.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flexmatch import (
    Client,
    DocumentNotFoundError,
    FlexMatchError,
    KnowledgeBase,
    KnowledgeBaseProtocol,
    SearchResult,
    SourceChoiceError,
)
from flexmatch.engine.embedders import OnnxEmbedder
from tests.adapters.http.harness import KB_CONFIG, running_api
from tests.adapters.http.servers import PageServer
from tests.conftest import write_config

SCORE_TOLERANCE = 1e-4
NOTES = {
    "keys.md": "# Keys and locks\n\nThe spare key to the boathouse hangs on the hook behind "
    "the blue door.\n\nThe shed key is under the third flowerpot.\n",
    "ferry.md": "# Ferry\n\nThe last ferry to Gull Island leaves at 21:40 on Sundays from "
    "the north pier.\n\nTickets are sold on board, cash only.\n",
    "garden.md": "# Garden\n\nThe roses by the south wall are pruned in March.\n\nThe "
    "apple tree was planted in 1987 by the first keeper.\n",
}
RECORDS = [
    {"fact_id": "lighthouse", "subject": "Lighthouse", "text": "The lighthouse is painted red."},
    {"fact_id": "market", "subject": "Market", "text": "The fish market opens at 05:30."},
    {"fact_id": "bakery", "subject": "Bakery", "text": "The bakery sells rye bread on Fridays."},
]
PAGE = """<html><head><title>Tide tables</title></head><body><main>
<h1>Tide tables</h1><p>High water at the harbour mouth is at 06:12 on the first of May,
and the tidal range that day is 4.1 metres.</p></main></body></html>"""
QUERIES = [
    "Where is the spare key to the boathouse?",
    "When does the last ferry leave on Sunday?",
    "What colour is the lighthouse?",
    "When is high water at the harbour mouth?",
    "bread",
]


@dataclass
class Pair:
    """The same data, embedded and served; ``ids`` pairs each embedded document id with
    the served one (equal for records and web pages)."""

    local: KnowledgeBase
    remote: Client
    ids: dict[str, str]
    notes: Path

    @property
    def both(self) -> tuple[KnowledgeBaseProtocol, KnowledgeBaseProtocol]:
        return self.local, self.remote


def _fill(kb: KnowledgeBaseProtocol, notes: Path, page_url: str) -> None:
    assert kb.ingest([notes]).added == len(NOTES)
    assert kb.add_records(RECORDS, source="facts").added == len(RECORDS)
    assert kb.ingest_urls([page_url], source="web").added == 1


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Pair]:
    root = tmp_path_factory.mktemp("congruence")
    notes = root / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    write_config(root / "local", KB_CONFIG)
    with (
        PageServer(PAGE) as page,
        KnowledgeBase.open(root / "local", embedder=embedder, env={}) as local,
        running_api(root / "served", embedder) as api,
    ):
        token = api.key("congruence", "default", "read,write,feedback")
        with Client(str(api.client.base_url), token) as remote:
            _fill(local, notes, page.url)
            _fill(remote, notes, page.url)
            served = {(r.source, r.title): r.id for r in remote.list_documents()}
            ids = {r.id: served[(r.source, r.title)] for r in local.list_documents()}
            yield Pair(local, remote, ids, notes)


def same_results(pair: Pair, local: list[SearchResult], remote: list[SearchResult]) -> None:
    """The same chunks of the same documents in the same order, with the same scores."""
    assert [pair.ids[r.document_id] for r in local] == [r.document_id for r in remote]
    assert [r.content for r in local] == [r.content for r in remote]
    assert [(r.title, r.source, r.location) for r in local] == [
        (r.title, r.source, r.location) for r in remote
    ]
    assert [r.score for r in remote] == pytest.approx([r.score for r in local], abs=SCORE_TOLERANCE)


def test_both_hold_the_same_documents(pair: Pair) -> None:
    local, remote = (kb.list_documents() for kb in pair.both)
    assert len(local) == len(remote) == len(NOTES) + len(RECORDS) + 1
    assert [(r.source, r.title, r.status) for r in local] == [
        (r.source, r.title, r.status) for r in remote
    ]
    # records and web pages are named alike on both sides: the same ids
    for record in local:
        if record.source != "default":
            assert pair.ids[record.id] == record.id
    for source in ("default", "facts", "web", "nowhere-yet"):
        local_ids = [pair.ids[r.id] for r in pair.local.list_documents(source=source)]
        assert local_ids == [r.id for r in pair.remote.list_documents(source=source)]


@pytest.mark.parametrize("text", QUERIES)
def test_queries_agree(pair: Pair, text: str) -> None:
    local, remote = (kb.query(text, top_n=4) for kb in pair.both)
    assert local, text
    same_results(pair, local, remote)


@pytest.mark.parametrize("text", QUERIES[:3])
def test_searches_agree_with_their_variants(pair: Pair, text: str) -> None:
    local, remote = (kb.search(text, top_n=3) for kb in pair.both)
    assert (local.query, local.variants, local.warnings) == (
        remote.query,
        remote.variants,
        remote.warnings,
    )
    same_results(pair, local.results, remote.results)


@pytest.mark.parametrize("filters", [{"source": "facts"}, {"source": "web"}, {"source": "none"}])
def test_filtered_queries_agree(pair: Pair, filters: dict[str, Any]) -> None:
    local, remote = (
        kb.query("opening hours and colours", top_n=5, filters=filters) for kb in pair.both
    )
    assert all(r.source == filters["source"] for r in local)
    same_results(pair, local, remote)


@pytest.mark.parametrize("text", ["ferry to Gull Island", "roses pruned in March"])
def test_similar_agrees(pair: Pair, text: str) -> None:
    local, remote = (kb.similar(text, top_n=3) for kb in pair.both)
    assert len(local) == 3
    same_results(pair, local, remote)


def test_documents_read_alike(pair: Pair) -> None:
    for record in pair.local.list_documents():
        local = pair.local.get_document(record.id)
        remote = pair.remote.get_document(pair.ids[record.id])
        assert remote.document.id == pair.ids[local.document.id]
        assert (local.document.title, local.document.source, local.document.chunks) == (
            remote.document.title,
            remote.document.source,
            remote.document.chunks,
        )
        assert [c.content for c in local.chunks] == [c.content for c in remote.chunks]
        assert [[m.text for m in c.matching_texts] for c in local.chunks] == [
            [m.text for m in c.matching_texts] for c in remote.chunks
        ]


def test_outlines_and_reads_agree(pair: Pair) -> None:
    for record in pair.local.list_documents():
        served = pair.ids[record.id]
        local, remote = pair.local.outline(record.id), pair.remote.outline(served)
        assert remote.document_id == served
        assert local.headings == remote.headings and local.chunks == remote.chunks
        for part in ({}, {"chunk": 0, "after": 1}, {"section": local.headings[0].section}):
            mine, theirs = pair.local.read(record.id, **part), pair.remote.read(served, **part)
            assert mine.chunks == theirs.chunks, (record.title, part)
            assert (mine.truncated, mine.next_chunk) == (theirs.truncated, theirs.next_chunk)
    first = pair.local.list_documents(source="default")[0]
    lines = pair.local.read(first.id, lines=(3, 3))
    assert lines.chunks == pair.remote.read(pair.ids[first.id], lines=(3, 3)).chunks


@pytest.mark.parametrize(
    ("pattern", "options"),
    [("key", {}), (r"\d\d:\d\d", {"regex": True}), ("THE", {"ignore_case": True, "limit": 3})],
)
def test_greps_agree(pair: Pair, pattern: str, options: dict[str, Any]) -> None:
    local, remote = (kb.grep(pattern, **options) for kb in pair.both)
    assert local.hits, pattern
    assert [pair.ids[h.document_id] for h in local.hits] == [h.document_id for h in remote.hits]
    fields = ("chunk_index", "location", "cite", "match", "line", "heading_path")
    assert [h.model_dump(include=set(fields)) for h in local.hits] == [
        h.model_dump(include=set(fields)) for h in remote.hits
    ]
    assert (local.documents, local.truncated, local.stopped) == (
        remote.documents,
        remote.truncated,
        remote.stopped,
    )


def test_stats_agree(pair: Pair) -> None:
    local, remote = (kb.stats() for kb in pair.both)
    counts = ("documents", "incomplete_documents", "chunks", "matching_texts")
    assert [getattr(local, c) for c in counts] == [getattr(remote, c) for c in counts]
    assert local.sources == remote.sources


def test_the_async_twins_answer_as_the_blocking_calls(pair: Pair) -> None:
    record = pair.local.list_documents(source="facts")[0]

    async def run(kb: KnowledgeBaseProtocol) -> tuple[Any, ...]:
        return (
            await kb.alist_documents(source="facts"),
            await kb.aget_document(record.id),
            await kb.astats(),
            [r.document_id for r in await kb.aquery("fish market", top_n=2)],
            [r.document_id for r in await kb.asimilar("fish market", top_n=2)],
            (await kb.asearch("fish market", top_n=2)).variants,
            await kb.aoutline(record.id),
            await kb.aread(record.id, chunk=0),
            await kb.agrep("fish"),
        )

    for kb in pair.both:
        listed, detail, stats, queried, similar, variants, outline, read, grep = asyncio.run(
            run(kb)
        )
        assert outline == kb.outline(record.id) and read == kb.read(record.id, chunk=0)
        assert grep == kb.grep("fish") and grep.hits
        assert listed == kb.list_documents(source="facts")
        assert detail.document == kb.get_document(record.id).document
        assert stats.documents == kb.stats().documents
        assert queried == [r.document_id for r in kb.query("fish market", top_n=2)]
        assert similar == [r.document_id for r in kb.similar("fish market", top_n=2)]
        assert variants == kb.search("fish market", top_n=2).variants


# the same bad input, the same error: its class, and its code where it has several
BAD: dict[str, Callable[[KnowledgeBaseProtocol, Path], object]] = {
    "empty query": lambda kb, _: kb.query("   "),
    "empty search": lambda kb, _: kb.search(""),
    "empty similar": lambda kb, _: kb.similar(" "),
    "unfilterable field": lambda kb, _: kb.query("anything", filters={"colour": 1.5}),
    "unknown source of records": lambda kb, _: kb.add_records(RECORDS, source="nowhere"),
    "files into an unknown source": lambda kb, notes: kb.ingest([notes], source="nowhere"),
    "urls into an unknown source": lambda kb, _: kb.ingest_urls(["http://127.0.0.1/"], source="x"),
    "no such document": lambda kb, _: kb.get_document("no-such-document"),
    "remove no such document": lambda kb, _: kb.remove_document("no-such-document"),
    "no original of no document": lambda kb, _: kb.get_original("no-such-document"),
    "no original of a record": lambda kb, _: kb.get_original("lighthouse"),
    "async: no such document": lambda kb, _: asyncio.run(kb.aget_document("no-such-document")),
    "no outline of no document": lambda kb, _: kb.outline("no-such-document"),
    "no read of no document": lambda kb, _: kb.read("no-such-document", chunk=0),
    "async: no read of no document": lambda kb, _: asyncio.run(kb.aread("no-such-document")),
    "two parts to read": lambda kb, _: kb.read("lighthouse", chunk=0, pages=(1, 2)),
    "no such section": lambda kb, _: kb.read("lighthouse", section="Nowhere"),
    "pages of a record": lambda kb, _: kb.read("lighthouse", pages=(1, 2)),
    "a broken regex": lambda kb, _: kb.grep("(unclosed", regex=True),
    "grep with a bad filter": lambda kb, _: kb.grep("key", filters={"colour": 1.5}),
    "grep over the limit": lambda kb, _: kb.grep("key", limit=1_000),
    "feedback on no such chunk": lambda kb, _: kb.add_feedback("why?", "no-such-document#0"),
    "feedback with an empty query": lambda kb, _: kb.add_feedback("  ", "lighthouse#0"),
    "async: feedback on no such chunk": lambda kb, _: asyncio.run(
        kb.aadd_feedback("why?", "no-such-document#0", False)
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_the_same_error(pair: Pair, case: str) -> None:
    raised: list[FlexMatchError] = []
    for kb in pair.both:
        with pytest.raises(FlexMatchError) as error:
            BAD[case](kb, pair.notes)
        raised.append(error.value)
    local, remote = raised
    assert type(local) is type(remote), (local, remote)
    assert local.code == remote.code
    if isinstance(local, DocumentNotFoundError):
        assert "no-such-document" in str(local) or "lighthouse" in str(local)
        assert "no-such-document" in str(remote) or "lighthouse" in str(remote)
    assert pair.local.stats().documents == pair.remote.stats().documents  # nothing lost


def test_records_into_a_files_source_is_where_they_differ(pair: Pair) -> None:
    """The one difference the protocol documents: an embedded knowledge base renders
    records through any source's template, a server only through a records source."""
    extra = [{"fact_id": "quay", "subject": "Quay", "text": "The quay is paved."}]
    assert pair.local.add_records(extra, source="default", tenant="elsewhere").added == 1
    with pytest.raises(SourceChoiceError) as refused:
        pair.remote.add_records(extra, source="default")
    assert refused.value.code == "not_a_records_source"


def test_a_removed_document_is_gone_from_both(pair: Pair) -> None:
    extra = [{"fact_id": "pier", "subject": "Pier", "text": "The pier is 300 metres long."}]
    for kb in pair.both:
        assert kb.add_records(extra, source="facts").document_ids == ["pier"]
        assert kb.query("How long is the pier?", top_n=1)[0].document_id == "pier"
        asyncio.run(kb.aremove_document("pier"))
        assert "pier" not in [r.id for r in kb.list_documents(source="facts")]
        with pytest.raises(DocumentNotFoundError, match="pier"):
            kb.get_document("pier")
    assert [r.id for r in pair.local.list_documents(source="facts")] == [
        r.id for r in pair.remote.list_documents(source="facts")
    ]


def test_feedback_teaches_both_alike(pair: Pair) -> None:
    """A helpful and an unhelpful mark, the same on both: the same receipts, the same
    learned texts in the document, and the same ranking after."""
    asked = "Which building by the sea has a crimson coat?"
    for kb in pair.both:
        helpful = kb.add_feedback(asked, "lighthouse#0")
        unhelpful = asyncio.run(kb.aadd_feedback(asked, "market#0", helpful=False))
        assert (helpful.chunk_id, helpful.helpful, helpful.merged) == ("lighthouse#0", True, False)
        assert (unhelpful.chunk_id, unhelpful.helpful, unhelpful.learned_id) == (
            "market#0",
            False,
            None,
        )
        assert kb.add_feedback(asked, "lighthouse#0").merged
    texts = [
        [
            (m.text, m.learned.count if m.learned else None)
            for c in kb.get_document("lighthouse").chunks
            for m in c.matching_texts
            if m.kind == "learned"
        ]
        for kb in pair.both
    ]
    assert texts[0] == texts[1] == [(asked, 2)]
    local, remote = (kb.query(asked) for kb in pair.both)
    same_results(pair, local, remote)
    assert local[0].document_id == "lighthouse"
    assert [r.signals.demoted for r in local] == [r.signals.demoted for r in remote]
