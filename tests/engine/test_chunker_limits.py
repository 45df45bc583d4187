"""A chunker is bounded per document: one that hangs fails its document at
``ingest.chunk_timeout``, one that returns a flood of sections or something that is not a
list of sections fails it with a message naming the chain and what it returned; the
other documents are stored."""

from __future__ import annotations

import gc
import threading
import time
import warnings
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.chains import Chunker, register
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.models import Document, Section
from tests.conftest import write_config

released = threading.Event()


@register("chunker", "test_hostile")
class _Hostile(Chunker):
    """What a careless chunker plug-in might do, chosen by the document's first word."""

    async def run(self, document: Document) -> list[Section]:
        word = document.text.split()[0]
        if word == "HANG":
            released.wait(3600)  # blocks its thread, as time.sleep would
        if word == "FLOOD":
            return [Section(text="x") for _ in range(20_000)]
        if word == "GARBAGE":
            return [42, "str", None]  # type: ignore[list-item]
        if word == "NOTALIST":
            return 42  # type: ignore[return-value]
        if word == "HUGE":
            return [Section(text=document.text * 1000)] * 50
        return [Section(text=document.text)]


@register("chunker", "test_plain")
class _Plain(Chunker):
    """A chunker whose ``run`` is not async (a plug-in author's slip): it still works."""

    def run(self, document: Document) -> list[Section]:  # type: ignore[override]
        return [Section(text=document.text)]


CONFIG = """sources:
  default:
    chunker: hostile
  plain:
    chunker: plain
ingest:
  chunk_timeout: 2
"""


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    write_config(kb, CONFIG)
    (kb / "chains").mkdir()
    (kb / "chains" / "hostile.yaml").write_text("kind: chunker\ntype: test_hostile\n")
    (kb / "chains" / "plain.yaml").write_text("kind: chunker\ntype: test_plain\n")
    return kb


def test_a_hostile_chunker_fails_only_its_document(
    kb_dir: Path, tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for word in ("HANG", "FLOOD", "GARBAGE", "NOTALIST", "HUGE", "fine"):
        (docs / f"{word.lower()}.txt").write_text(f"{word} the tide comes in at noon.\n")
    (tmp_path / "plain.txt").write_text("A chunker that is not async still chunks.\n")
    started = time.monotonic()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
                report = kb.ingest([docs])
                plain = kb.ingest([tmp_path / "plain.txt"], source="plain")
            gc.collect()
    finally:
        released.set()
    took = time.monotonic() - started
    what = "chunker chain 'hostile' (type 'test_hostile')"
    errors = {Path(f.uri).name: f.error.split(": ", 1)[1] for f in report.failed}
    assert errors == {
        "hang.txt": f"{what} took longer than 2s and was left (ingest.chunk_timeout)",
        "flood.txt": f"{what} returned 20,000 sections for a 32-character text, over the "
        "cap of 100 (ingest.max_sections, and at most one section per 4 characters)",
        "garbage.txt": f"{what} returned 3 of 3 sections that are not Section objects (the "
        "first, at 0: int 42)",
        "notalist.txt": f"{what} returned 42, not a list of sections",
        "huge.txt": f"{what} returned 1,550,000 characters of sections for a 31-character "
        "text (at most 8 times the text)",
    }
    assert report.added == 1 and plain.added == 1
    assert took < 60  # one deadline of 2 s, not an hour
    never_awaited = [w for w in caught if "never awaited" in str(w.message)]
    assert never_awaited == []
