"""A unit test per no-LLM chain type (the LLM ones run against the fake server in
tests/engine/test_llm.py and tests/test_knowledge_base.py)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import TypeVar

from flexmatch.chains import (
    Chain,
    ChainContext,
    Chunker,
    Formatter,
    MatchingTextChain,
    QualifyingTextChain,
    QueryTransform,
    Reranker,
    build_chain,
)
from flexmatch.config import ChainRef
from flexmatch.models import Document, Element, SearchResult, Section
from flexmatch.results import tool_result
from flexmatch.text import count_tokens

K = TypeVar("K", bound=Chain)


def _chain(name: str, kind: type[K], **params: object) -> K:
    return build_chain(ChainRef(chain=name, params=dict(params)), kind, ChainContext())


def _document() -> Document:
    para = " ".join(f"Sentence number {i} talks about apples and pears." for i in range(60))
    return Document(
        id="doc-1",
        uri="/tmp/fruit.md",
        source="default",
        title="Fruit guide",
        elements=[
            Element(kind="title", text="Fruit guide"),
            Element(kind="paragraph", text="This guide explains how orchards grow fruit."),
            Element(kind="heading", text="Apples", level=1),
            Element(kind="paragraph", text="Apples grow on trees. They are picked in autumn."),
            Element(kind="heading", text="Storage", level=2),
            Element(kind="paragraph", text=para),
            Element(kind="heading", text="Pears", level=1),
            Element(kind="list_item", text="Pears ripen off the tree."),
        ],
    )


def test_structure_chunker_keeps_heading_paths_and_budget() -> None:
    chunker = _chain("structure", Chunker, max_tokens=120, overlap_tokens=20)
    sections = asyncio.run(chunker.run(_document()))
    paths = [s.heading_path for s in sections]
    assert paths[0] == ["Fruit guide"]
    assert ["Fruit guide", "Apples"] in paths
    assert ["Fruit guide", "Apples", "Storage"] in paths
    assert paths[-1] == ["Fruit guide", "Pears"]  # a level-1 heading pops the level-2 one
    storage = [s for s in sections if s.heading_path[-1] == "Storage"]
    assert len(storage) >= 4
    assert all(count_tokens(s.text) <= 120 for s in sections)
    # overlap: the next chunk starts with the last two sentences (18 of 20 tokens) of this one
    tail = ". ".join(storage[0].text.split(". ")[-2:])
    assert storage[1].text.startswith(tail) and tail.startswith("Sentence number")
    assert "\n" not in storage[1].text  # sentences of one paragraph stay one paragraph


def test_structure_chunker_headings_only_document() -> None:
    document = Document(
        id="d",
        uri="u",
        source="s",
        title="T",
        elements=[Element(kind="heading", text="Only a heading", level=1)],
    )
    sections = asyncio.run(_chain("structure", Chunker).run(document))
    assert [s.text for s in sections] == ["Only a heading"]


def test_window_chunker_overlaps() -> None:
    window = _chain("window", Chunker, max_tokens=50, overlap_tokens=10)
    sections = asyncio.run(window.run(_document()))
    assert len(sections) > 5
    first, second = sections[0].text.split(), sections[1].text.split()
    assert first[-3:] == second[:3] or set(first[-5:]) & set(second[:10])
    assert all(s.heading_path == [] for s in sections)


def test_sentences_matching_text_prefixes_heading_and_keeps_content() -> None:
    section = Section(
        text="Apples grow on trees. They are picked in autumn.", heading_path=["Apples"]
    )
    texts = asyncio.run(_chain("sentences", MatchingTextChain).run(section, _document()))
    assert [t.kind for t in texts] == ["sentence", "sentence", "content"]
    assert texts[0].text == "Fruit guide › Apples: Apples grow on trees."
    assert texts[-1].text.endswith("They are picked in autumn.")
    without = _chain("sentences", MatchingTextChain, include_content=False)
    assert [t.kind for t in asyncio.run(without.run(section, _document()))] == ["sentence"] * 2


def test_sentence_windows_join_neighbours_and_cover_every_sentence() -> None:
    words = ["one", "two", "three", "four", "five", "six", "seven"]
    text = " ".join(f"The {w} fact is here." for w in words)
    section = Section(text=text, heading_path=["Facts"])
    chain = _chain("sentences", MatchingTextChain, window=3, include_content=False)
    texts = [t.text for t in asyncio.run(chain.run(section, _document()))]
    assert texts == [
        "Fruit guide › Facts: The one fact is here. The two fact is here. The three fact is here.",
        "Fruit guide › Facts: The four fact is here. The five fact is here. The six fact is here.",
        # the last window ends at the last sentence
        "Fruit guide › Facts: The five fact is here. The six fact is here. The seven fact is here.",
    ]
    strided = _chain("sentences", MatchingTextChain, window=3, stride=2, include_content=False)
    assert len(asyncio.run(strided.run(section, _document()))) == 3  # starts 0, 2, 4
    # short lines join their neighbours instead of being dropped (min_words 4)
    listing = Section(text="-a all\n-l long\n-h human", heading_path=["Options"])
    joined = asyncio.run(chain.run(listing, _document()))
    assert [t.text for t in joined] == ["Fruit guide › Options: -a all -l long -h human"]


def test_offline_default_embeds_each_sentence_and_the_cheaper_chains_are_selectable() -> None:
    text = " ".join(f"Fact number {i} is written here." for i in range(7))
    section = Section(text=text, heading_path=["Facts"])
    default = _chain("questions", MatchingTextChain)  # no LLM: its offline fallback
    assert default.spec.name == "sentences"
    texts = asyncio.run(default.run(section, _document()))
    assert [t.kind for t in texts] == ["sentence"] * 7 + ["content"]
    assert texts[3].text == "Fruit guide › Facts: Fact number 3 is written here."
    windows = asyncio.run(_chain("sentence-windows", MatchingTextChain).run(section, _document()))
    assert [t.kind for t in windows] == ["sentence"] * 3 + ["content"]
    assert windows[0].text == (
        "Fruit guide › Facts: Fact number 0 is written here. Fact number 1 is written here. "
        "Fact number 2 is written here."
    )
    assert windows[2].text.endswith("Fact number 6 is written here.")
    packed = asyncio.run(_chain("packed-sentences", MatchingTextChain).run(section, _document()))
    # six-word sentences: two make a text of 12 words; the last one is left alone
    assert [t.kind for t in packed] == ["sentence"] * 4 + ["content"]
    assert packed[3].text == "Fruit guide › Facts: Fact number 6 is written here."


def test_short_sentences_are_packed_until_a_text_has_enough_words() -> None:
    text = (
        "-a all entries\n-l long listing\n-h human sizes\n"
        "A prose sentence about listing directories stays alone as it is long enough."
    )
    section = Section(text=text, heading_path=["Options"])
    chain = _chain("sentences", MatchingTextChain, min_text_words=8, include_content=False)
    assert [t.text for t in asyncio.run(chain.run(section, _document()))] == [
        "Fruit guide › Options: -a all entries -l long listing -h human sizes",
        "Fruit guide › Options: A prose sentence about listing directories stays alone as "
        "it is long enough.",
    ]


def test_short_chunks_are_matched_by_their_own_text_alone() -> None:
    section = Section(text="Apples grow on trees. They are picked in autumn.", heading_path=[])
    chain = _chain("sentences", MatchingTextChain, window=3, min_chunk_words=20)
    assert [t.kind for t in asyncio.run(chain.run(section, _document()))] == ["content"]
    long = Section(text=" ".join(["Apples grow on tall trees."] * 6), heading_path=[])
    kinds = [t.kind for t in asyncio.run(chain.run(long, _document()))]
    assert kinds == ["sentence", "sentence", "content"]


def test_content_matching_text_is_the_chunk_only() -> None:
    section = Section(text="Pears ripen off the tree.", heading_path=["Pears"])
    texts = asyncio.run(_chain("content", MatchingTextChain).run(section, _document()))
    assert [(t.kind, t.text) for t in texts] == [
        ("content", "Fruit guide › Pears\nPears ripen off the tree.")
    ]


def test_headings_qualifying_text() -> None:
    section = Section(text="Pears ripen off the tree.", heading_path=["Pears"])
    text = asyncio.run(_chain("headings", QualifyingTextChain).run(section, _document()))
    assert text == (
        "From Fruit guide › Pears. The document begins: "
        "This guide explains how orchards grow fruit."
    )


def test_identity_transform() -> None:
    assert asyncio.run(_chain("identity", QueryTransform).run("food location")) == ["food location"]


def _results() -> list[SearchResult]:
    return [
        SearchResult(
            chunk_id=f"c{i}",
            document_id=f"d{i}",
            uri=f"/x/{i}",
            source="default",
            title=f"T{i}",
            heading_path=["H"],
            content=f"content {i}",
            qualifying_text="ctx",
            matched_text=f"Q{i}?",
            score=1.0 - i / 10,
        )
        for i in range(3)
    ]


def test_no_reranker_keeps_order() -> None:
    results = _results()
    assert asyncio.run(_chain("none", Reranker).run("q", results)) == results


def test_json_formatter_is_a_tool_result() -> None:
    formatter = _chain("json", Formatter)
    data = json.loads(asyncio.run(formatter.run(tool_result("q", _results()))))
    assert data["query"] == "q" and [r["rank"] for r in data["results"]] == [1, 2, 3]
    first = data["results"][0]
    wanted = {"source", "title", "qualifying_text", "content", "score", "matched_text", "uri"}
    assert wanted <= set(first)


def test_markdown_formatter_renders_facts_block() -> None:
    formatter = _chain("markdown", Formatter)
    text = asyncio.run(formatter.run(tool_result("q", _results())))
    assert text.startswith("## Facts from the knowledge base")
    assert "title: T0\nsection: H\n" in text and "matched: Q0?" in text and "context: ctx" in text
    opening = re.search(r'<fact-([0-9a-f]{16}) rank="1">', text)
    assert opening is not None and text.count(f"</fact-{opening.group(1)}>") == 4  # 3 + named
    assert "No stored knowledge" in asyncio.run(formatter.run(tool_result("q", [])))
