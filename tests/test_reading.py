"""Reading what a search found, through the Python API: a document's outline, part of it
by section, pages, lines or chunk, and grep over the stored text; each bounded and each
scoped to what the principal may read (a hidden document answers as a missing one, and
adds no grep hit nor count). The other interfaces are held to the same answers by
tests/test_access_paths.py and tests/test_congruence.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexmatch import (
    Access,
    Document,
    DocumentNotFoundError,
    Element,
    KnowledgeBase,
    Location,
    Principal,
    QueryError,
    answer_result,
)
from flexmatch.models.reading import GREP_SECONDS, MAX_READ_CHARS
from flexmatch.testing import memory_knowledge_base

ALICE = Principal(user="alice")
BOB = Principal(user="bob")


def manual() -> Document:
    """A three-page manual: a title, two sections, a subsection, one paragraph a page."""
    return Document(
        id="manual",
        uri="/docs/manual.pdf",
        source="default",
        title="Manual",
        elements=[
            Element(kind="heading", level=1, text="Setup", page=1),
            Element(kind="paragraph", text="Install the pump. Set max_retries to 3.", page=1),
            Element(kind="heading", level=2, text="Wiring", page=2),
            Element(kind="paragraph", text="Connect the red wire to terminal B.", page=2),
            Element(kind="heading", level=1, text="Care", page=3),
            Element(kind="paragraph", text="Clean the filter every month.", page=3),
        ],
    )


def secret() -> Document:
    return Document(
        id="secret",
        uri="/docs/secret.md",
        source="default",
        title="Secret",
        elements=[
            Element(kind="heading", level=1, text="Plans"),
            Element(kind="paragraph", text="The max_retries of the vault is 9."),
        ],
    )


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    with memory_knowledge_base(tmp_path / "kb") as kb:
        report = kb.ingest_documents([manual(), secret()])
        assert not report.failed
        kb.set_access("secret", Access(principals=["user:bob"]))
        yield kb


def test_the_outline_lists_headings_with_locations_and_chunks(kb: KnowledgeBase) -> None:
    outline = kb.outline("manual")
    assert [(h.section, h.level) for h in outline.headings] == [
        ("Setup", 1),
        ("Setup › Wiring", 2),
        ("Care", 1),
    ]
    setup, wiring, care = outline.headings
    assert setup.location == Location(page=1, page_end=2)
    assert wiring.location == Location(page=2) and care.location == Location(page=3)
    assert setup.chunk_start <= wiring.chunk_start <= wiring.chunk_end < care.chunk_start
    assert setup.chunk_end == wiring.chunk_end and care.chunk_end == outline.chunks - 1


def test_read_by_section_pages_and_chunk_with_neighbours(kb: KnowledgeBase) -> None:
    wiring = kb.read("manual", section="setup › wiring")  # any case, the outline's path
    assert [c.content for c in wiring.chunks] == ["Connect the red wire to terminal B."]
    assert wiring.chunks[0].cite == "manual.pdf p. 2" and not wiring.truncated
    assert kb.read("manual", section="Wiring").chunks == wiring.chunks  # one heading
    setup = kb.read("manual", section="Setup")
    assert "max_retries" in setup.chunks[0].content and len(setup.chunks) == 2
    pages = kb.read("manual", pages=(2, 3))
    assert [c.location.page for c in pages.chunks if c.location] == [2, 3]
    middle = wiring.chunks[0].index
    around = kb.read("manual", chunk=middle, before=1, after=1)
    assert [c.index for c in around.chunks] == [middle - 1, middle, middle + 1]
    assert [c.index for c in kb.read("manual").chunks] == [0, 1, 2]  # from the beginning


def test_read_by_lines_of_a_text_file(tmp_path: Path) -> None:
    text = "# Notes\n\nalpha line\n\n## Later\n\nomega line\n"
    (tmp_path / "notes.md").write_text(text)
    with memory_knowledge_base(tmp_path / "kb") as kb:
        kb.ingest([tmp_path / "notes.md"])
        document_id = kb.list_documents()[0].id
        later = kb.read(document_id, lines=(6, 7))
        assert [c.content for c in later.chunks] == ["omega line"]
        assert later.chunks[0].cite == "notes.md:7"
        assert kb.read(document_id, lines=(1, 3)).chunks[0].content.endswith("alpha line")


def test_a_long_part_is_cut_and_says_where_to_read_on(tmp_path: Path) -> None:
    paragraphs = [
        Element(kind="paragraph", text=" ".join(f"w{i}x{j}" for j in range(600))) for i in range(12)
    ]
    long = Document(id="long", uri="/long.txt", source="default", title="Long", elements=paragraphs)
    with memory_knowledge_base(tmp_path / "kb") as kb:
        kb.ingest_documents([long])
        first = kb.read("long")
        assert first.truncated and first.next_chunk is not None and first.remaining > 0
        assert sum(len(c.content) for c in first.chunks) <= MAX_READ_CHARS
        on = kb.read("long", chunk=first.next_chunk, after=10)
        assert on.chunks[0].index == first.chunks[-1].index + 1


def test_a_part_it_does_not_have_is_named_in_one_line(kb: KnowledgeBase) -> None:
    with pytest.raises(QueryError, match=r"no text on pages 7-9 \(it has pages 1-3\)"):
        kb.read("manual", pages=(7, 9))
    with pytest.raises(QueryError, match="no section 'Repairs'"):
        kb.read("manual", section="Repairs")
    with pytest.raises(QueryError, match="no chunk 40"):
        kb.read("manual", chunk=40)
    with pytest.raises(QueryError, match="name one part to read, not section and pages"):
        kb.read("manual", section="Setup", pages=(1, 1))
    with pytest.raises(QueryError, match="name the chunk"):
        kb.read("manual", after=2)
    with pytest.raises(QueryError, match="first <= last"):
        kb.read("manual", pages=(3, 1))


def test_a_hidden_document_reads_as_a_missing_one(kb: KnowledgeBase) -> None:
    def said(call: object, document_id: str) -> str:
        with pytest.raises(DocumentNotFoundError) as caught:
            call(document_id)  # type: ignore[operator]
        return str(caught.value).replace(document_id, "ID")

    for call in (
        lambda d: kb.outline(d, principal=ALICE),
        lambda d: kb.read(d, principal=ALICE),
        lambda d: kb.read(d, section="Plans", principal=ALICE),
    ):
        assert said(call, "secret") == said(call, "nothing-here")
    assert kb.outline("secret", principal=BOB).headings[0].heading == "Plans"
    assert kb.read("secret", principal=BOB).chunks


def test_grep_finds_exact_text_cited_and_only_what_the_principal_may_read(
    kb: KnowledgeBase,
) -> None:
    everything = kb.grep("max_retries")
    assert {h.document_id for h in everything.hits} == {"manual", "secret"}
    alice = kb.grep("max_retries", principal=ALICE)
    assert [h.document_id for h in alice.hits] == ["manual"] and alice.documents == 1
    hit = alice.hits[0]
    assert hit.cite == "manual.pdf p. 1" and hit.match == "max_retries"
    assert hit.line == "Install the pump. Set max_retries to 3."
    assert kb.read("manual", chunk=hit.chunk_index).chunks[0].content == hit.line
    assert kb.grep("vault", principal=ALICE).hits == []  # not even a count
    assert kb.grep("vault", principal=ALICE).documents == 0
    assert len(kb.grep("vault", principal=BOB).hits) == 1


def test_grep_by_regex_case_filters_and_limit(kb: KnowledgeBase) -> None:
    assert kb.grep("MAX_RETRIES").hits == []
    assert len(kb.grep("MAX_RETRIES", ignore_case=True).hits) == 2
    numbers = kb.grep(r"max_retries\D+(\d)", regex=True)
    assert [h.match[-1] for h in numbers.hits] == ["3", "9"]
    assert [
        h.document_id for h in kb.grep("max_retries", filters={"document_id": "secret"}).hits
    ] == ["secret"]
    first = kb.grep("the", ignore_case=True, limit=2)
    assert len(first.hits) == 2 and first.truncated and first.stopped == "limit"
    with pytest.raises(QueryError, match="not a valid regex"):
        kb.grep("(unclosed", regex=True)
    assert kb.grep("(unclosed").hits == []  # exact text: no regex to break


def test_a_catastrophic_regex_stops_at_the_time_budget(tmp_path: Path) -> None:
    bomb = Document(
        id="bomb",
        uri="/bomb.txt",
        source="default",
        title="Bomb",
        elements=[Element(kind="paragraph", text="a" * 60 + "!")],
    )
    with memory_knowledge_base(tmp_path / "kb") as kb:
        kb.ingest_documents([bomb])
        started = time.monotonic()
        found = kb.grep("(a|aa)+$", regex=True)
        # without the budget this runs for ages (its backtracking doubles with each "a");
        # with it, about GREP_SECONDS, with room for a busy machine
        assert time.monotonic() - started < GREP_SECONDS * 5
        assert found.truncated and found.stopped == "time" and found.hits == []


def test_a_search_result_carries_what_read_takes(kb: KnowledgeBase) -> None:
    result = kb.query("red wire terminal", top_n=1)[0]
    assert result.document_id == "manual" and result.location == Location(page=2)
    chunk = kb.read(result.document_id, chunk=result.chunk_index).chunks[0]
    assert chunk.content == result.content
    item = answer_result(kb.search("red wire terminal", top_n=1)).results[0]
    assert item.chunk_index == result.chunk_index


def test_another_tenant_reads_and_greps_nothing_of_this_one(kb: KnowledgeBase) -> None:
    assert kb.grep("max_retries", tenant="other").hits == []
    with pytest.raises(DocumentNotFoundError, match="no document 'manual' in tenant 'other'"):
        kb.outline("manual", tenant="other")
    with pytest.raises(DocumentNotFoundError, match="no document 'manual' in tenant 'other'"):
        kb.read("manual", chunk=0, tenant="other")
