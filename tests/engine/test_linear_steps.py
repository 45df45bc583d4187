"""Every ingest step is linear in its input: what is computed for a whole document is
computed once per document, not once per chunk, and nothing reads a long line again for
each thing on it. Inputs that were quadratic (a document's lead for each chunk, a
minified script's outline, the near-duplicate check) are timed against generous bounds
that the quadratic versions missed by far."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest

from flexmatch.config import ChainRef
from flexmatch.engine.chains import ChainContext, QualifyingTextChain, build_chain
from flexmatch.engine.chains.variables import document_text, section_variables
from flexmatch.engine.ingest import VectorSet
from flexmatch.inputs.parsing.code import outline
from flexmatch.models import Document, Element, Section
from flexmatch.text import LEAD_SCAN_CHARS, lead_sentence, split_sentences


def _document(paragraphs: int) -> Document:
    elements = [Element(kind="title", text="Harbour")] + [
        Element(kind="paragraph", text=f"Boats moor at pier {i} when the tide is high.")
        for i in range(paragraphs)
    ]
    return Document(id="d", uri="harbour.md", source="default", title="Harbour", elements=elements)


def test_the_headings_chain_finds_a_documents_lead_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flexmatch.engine.chains.variables as variables

    calls: list[int] = []

    def counted(text: str, max_chars: int = 300) -> str:
        calls.append(len(text))
        return lead_sentence(text, max_chars)

    monkeypatch.setattr(variables, "lead_sentence", counted)
    chain = build_chain(
        ChainRef(chain="headings"), QualifyingTextChain, ChainContext(kb_dir=tmp_path)
    )
    document = _document(2_000)
    sections = [Section(text=f"Pier {i}.") for i in range(500)]

    async def run() -> list[str]:
        return [await chain.run(section, document) for section in sections]

    texts = asyncio.run(run())
    assert len(calls) == 1  # not 500
    assert (
        texts[0] == "From Harbour. The document begins: Boats moor at pier 0 when the tide is high."
    )
    other = _document(3)
    assert asyncio.run(chain.run(sections[0], other)).endswith("pier 0 when the tide is high.")
    assert len(calls) == 2  # a new document: its own lead


def test_a_documents_text_is_joined_once_for_all_its_chunks() -> None:
    document = _document(1_000)
    first = document_text(document)
    assert first == document.text
    assert document_text(document) is first  # the same string, not joined again
    assert section_variables(Section(text="x"), document)["document"]["text"] is first


def test_the_lead_is_read_from_the_start_of_a_text_only() -> None:
    prose = "Boats moor at the pier when the tide is high."
    assert lead_sentence(f"Harbour\n{prose} More follows here.") == prose
    # a text without prose (a minified script) is read to LEAD_SCAN_CHARS, not to its end:
    # a fraction of a millisecond, where reading its 20 MB takes over half a second (the
    # fastest of three runs, so a loaded machine's pause in one of them does not count)
    script = "x=1;" * 5_000_000 + " " + prose
    fastest = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        assert lead_sentence(script) == ""
        fastest = min(fastest, time.perf_counter() - started)
    assert fastest < 0.05, fastest
    assert lead_sentence("a" * (LEAD_SCAN_CHARS + 10) + "\n" + prose) == ""


def test_sentences_split_as_before() -> None:
    text = 'He said "Go." Then (later) she left!  Yes\nnext line. ok. Fine…  Done'
    assert split_sentences(text) == [
        'He said "Go.',  # closing marks after a sentence's end go with the break
        "Then (later) she left!",
        "Yes",
        "next line. ok.",
        "Fine…",
        "Done",
    ]


def test_a_minified_scripts_outline_is_linear() -> None:
    """40,000 functions on one 2 MB line: reading the line for each one took minutes."""
    source = "".join(f"function f{i}(a){{return a+{i}}};" for i in range(40_000))
    started = time.perf_counter()
    found = outline(source, "javascript")
    took = time.perf_counter() - started
    assert len(found.definitions) == 40_000
    assert found.definitions[1].label == "function f1"
    assert took < 60, f"outline took {took:.1f}s"


def test_the_near_duplicate_set_compares_few_vectors() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((10_000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    seen = VectorSet()
    started = time.perf_counter()
    for vector in vectors:
        assert seen.max_similarity(vector) < 0.5  # random vectors: nothing near
        seen.add(vector)
    took = time.perf_counter() - started
    # ~1.6 s on a quiet machine; each against all earlier: ~90 s
    assert took < 45, f"10,000 vectors took {took:.1f}s"
    assert all(seen.max_similarity(v) > 0.9999 for v in vectors[:500])  # equal: always found
    missed = 0
    for base in vectors[:1_000]:  # at cosine 0.995, found (almost) always
        noise = rng.standard_normal(384).astype(np.float32)
        noise -= (noise @ base) * base
        noise /= np.linalg.norm(noise)
        near = 0.995 * base + np.sqrt(1 - 0.995**2) * noise
        missed += seen.max_similarity(near) < 0.994
    assert missed <= 5, f"{missed} of 1,000 near duplicates missed"
