"""A source plug-in's fetch is bounded per item: a fetch that hangs fails its item at
``ingest.plugin_fetch_timeout``, one that gives too many documents fails it at
``ingest.plugin_max_documents``; each names the plug-in and the item, the other items are
stored, and nothing is pruned after such a run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.sources import Document, Element, ItemRef, SourceType, register
from tests.conftest import write_config

released = threading.Event()  # lets the hung fetches end once the test is done
made: list[int] = []  # how many documents the endless item was asked for


def _document(source: str, name: str, index: int = 0) -> Document:
    text = f"The {name} lighthouse keeper logs ship number {index} at dawn."
    return Document(
        id=f"{name}-{index}",
        uri=f"slow:{name}/{index}",
        source=source,
        title=name,
        elements=[Element(kind="paragraph", text=text)],
    )


@register("test_unbounded")
class _Unbounded(SourceType):
    """Items that hang (before their first document or after it), never end, or are
    ordinary; ``first`` is listed only on the first run."""

    prunable = True
    runs = 0

    def list_items(self, inputs: list[str]) -> Iterator[ItemRef]:
        _Unbounded.runs += 1
        names = ["first"] if _Unbounded.runs == 1 else []
        for name in [*names, "hang", "ok", "endless", "halfway", "biglist"]:
            yield ItemRef(id=f"{name}-0", uri=f"slow:{name}", data=name)

    def fetch(self, ref: ItemRef) -> object:
        name = ref.data
        if name == "hang":
            released.wait(3600)
            return _document(self.context.name, name)
        if name == "endless":
            return self._endless()
        if name == "halfway":
            return self._halfway()
        if name == "biglist":
            return [_document(self.context.name, name, i) for i in range(50)]
        return _document(self.context.name, name)

    def _endless(self) -> Iterator[Document]:
        index = 0
        while True:
            made.append(index)
            yield _document(self.context.name, "endless", index)
            index += 1

    def _halfway(self) -> Iterator[Document]:
        yield _document(self.context.name, "halfway")
        released.wait(3600)
        yield _document(self.context.name, "halfway", 1)


CONFIG = """sources:
  default: {}
  slow:
    type: test_unbounded
ingest:
  plugin_fetch_timeout: 1.5
  plugin_max_documents: 5
"""


def test_a_hung_or_endless_fetch_fails_its_item_alone(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    write_config(tmp_path / "kb", CONFIG)
    _Unbounded.runs = 0
    made.clear()
    try:
        with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
            kb.ingest(source="slow")
            made.clear()
            started = time.monotonic()
            report = kb.ingest(source="slow", prune=True)
            took = time.monotonic() - started
            stored = sorted(d.id for d in kb.list_documents())
    finally:
        released.set()
    what = "source 'slow' (type 'test_unbounded')"
    errors = {f.uri: f.error for f in report.failed}
    assert errors == {
        "slow:hang": f"slow:hang: {what} did not finish fetching this item within 1.5s and "
        "was left; 0 document(s) of it were kept (ingest.plugin_fetch_timeout)",
        "slow:halfway": f"slow:halfway: {what} did not finish fetching this item within 1.5s "
        "and was left; 1 document(s) of it were kept (ingest.plugin_fetch_timeout)",
        "slow:endless": f"slow:endless: {what} gave more than 5 documents for this item; the "
        "first 5 were kept, the rest not read (ingest.plugin_max_documents)",
        "slow:biglist": f"slow:biglist: {what} gave more than 5 documents for this item; the "
        "first 5 were kept, the rest not read (ingest.plugin_max_documents)",
    }
    assert took < 60  # two deadlines of 1.5 s and a loaded machine's ingest, not an hour
    assert len(made) <= 8  # the endless item was stopped, one or two ahead of the cap
    # the first run stored what it reached; the second listed no "first", but was
    # incomplete: nothing pruned
    assert report.removed == []
    assert any(w.startswith("not pruned:") for w in report.warnings)
    assert "first-0" in stored and "ok-0" in stored and "halfway-0" in stored
    assert [i for i in stored if i.startswith("endless-")] == [f"endless-{i}" for i in range(5)]
    assert "hang-0" not in stored and "halfway-1" not in stored
