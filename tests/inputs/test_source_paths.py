"""A source's configured ``paths``: what a run without inputs reads, and when its listing
may be pruned after (never when a path, a folder or an item could not be read)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexmatch import ConfigError, IngestReport, SourceConfig, SourceSync, SyncReport
from flexmatch.config import IngestConfig
from flexmatch.engine.ingest.load import within
from flexmatch.inputs.sources import SourceReader
from flexmatch.inputs.sources.types import StoredCopies
from flexmatch.models import Document, FailedDocument
from flexmatch.sources import ItemRef, SourceType, register


@register("test_whole_listing")
class WholeListing(SourceType):
    """A plug-in that says its listing is the whole source, as plug-ins always could."""

    prunable = True

    def list_items(self, inputs: list[str]) -> Iterator[ItemRef]:
        yield from ()


def _reader(
    kb: Path, name: str = "docs", stored: StoredCopies | None = None, **config: object
) -> SourceReader:
    return SourceReader(name, SourceConfig(**config), kb, IngestConfig(), stored=stored)


def _read(reader: SourceReader) -> list[object]:
    return list(reader.read(reader.plan([])))


def _notes(tmp_path: Path) -> Path:
    notes = tmp_path / "notes"
    (notes / "deep").mkdir(parents=True)
    (notes / "a.md").write_text("# A\n\nAlpha.\n")
    (notes / "deep" / "b.md").write_text("# B\n\nBeta.\n")
    return notes


def test_a_run_without_inputs_reads_the_paths_relative_to_the_knowledge_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _notes(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "home.md").write_text("# Home\n\nAt home.\n")
    reader = _reader(tmp_path / "kb", paths=["../notes", "~/home.md"])
    documents = [i for i in _read(reader) if isinstance(i, Document)]
    assert sorted(Path(d.uri).name for d in documents) == ["a.md", "b.md", "home.md"]
    assert all(".." not in d.uri for d in documents)  # the paths are normalised
    assert reader.prunable and reader.unlisted is None
    assert reader.log.incomplete == []


def test_which_sources_list_themselves_whole(tmp_path: Path) -> None:
    assert not _reader(tmp_path).prunable
    assert _reader(tmp_path).unlisted == "nothing to list: set sources.docs.paths"
    records = _reader(tmp_path, "facts", type="records")
    assert (records.prunable, records.unlisted) == (
        False,
        "nothing to list: set sources.facts.paths",
    )
    assert _reader(tmp_path, "facts", type="records", paths=["x.json"]).prunable
    web = _reader(tmp_path, "site", type="web")
    assert web.prunable and web.unlisted == "nothing to list: set sources.site.urls"
    assert _reader(tmp_path, "site", type="web", urls=["https://example.com/"]).unlisted is None
    plugin = _reader(tmp_path, "mine", type="test_whole_listing")
    assert plugin.prunable and plugin.unlisted is None  # the class attribute still works


def test_a_web_source_has_urls_not_paths() -> None:
    with pytest.raises(ValueError, match="paths applies to files and records sources"):
        SourceConfig(type="web", paths=["notes"])


def test_a_missing_configured_path_leaves_the_run_incomplete(tmp_path: Path) -> None:
    _notes(tmp_path)
    reader = _reader(tmp_path / "kb", paths=["../notes", "../gone"])
    items = _read(reader)
    assert sum(isinstance(i, Document) for i in items) == 2  # the rest is still read
    assert reader.log.incomplete == [f"not listed: {tmp_path}/gone: no such file or folder"]


def test_a_folder_the_walk_cannot_read_leaves_the_run_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests run as root, which reads any folder: the walk's listing of one is made to fail
    the way an unreadable (or vanished) folder fails."""
    notes = _notes(tmp_path)
    real = Path.iterdir

    def iterdir(self: Path) -> Iterator[Path]:
        if self == notes / "deep":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    reader = _reader(tmp_path, paths=["notes"])
    items = _read(reader)
    assert [Path(i.uri).name for i in items if isinstance(i, Document)] == ["a.md"]
    assert reader.log.incomplete == [
        f"not listed: {notes}/deep: folder not read (Permission denied)"
    ]


def test_an_unreadable_file_of_many_documents_leaves_the_run_incomplete(tmp_path: Path) -> None:
    """A records file that cannot be read held records under ids of their own: pruning
    after it would remove them all."""
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps([{"id": "r1", "title": "R", "text": "one"}]))
    (folder / "bad.json").write_text("[{broken")
    reader = _reader(tmp_path, "facts", type="records", paths=["records"])
    items = _read(reader)
    assert [i.id for i in items if isinstance(i, Document)] == ["r1"]
    assert reader.log.incomplete == [f"{folder}/bad.json could not be read"]


def test_a_stored_file_that_fails_is_kept_and_does_not_stop_the_prune(tmp_path: Path) -> None:
    """A file's document carries the file's id: reached, it is kept; the run is whole."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nAlpha.\n")
    (notes / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    stored_ids = {ref.id for ref in _reader(tmp_path, paths=["notes"]).plan([]).refs}
    stored = StoredCopies(metadata=lambda i: {} if i in stored_ids else None)
    reader = _reader(tmp_path, paths=["notes"], stored=stored)
    items = _read(reader)
    assert any(isinstance(i, FailedDocument) and i.skipped is None for i in items)
    assert reader.log.incomplete == []
    assert stored_ids <= reader.log.reached
    unknown = _reader(tmp_path, paths=["notes"])  # never stored: it may have held more
    _read(unknown)
    assert unknown.log.incomplete == [f"{notes}/broken.pdf could not be read"]


def test_a_sync_report_is_ok_only_without_failures() -> None:
    done = SourceSync(name="a", type="files", started="2026-01-01T00:00:00Z", outcome="done")
    skipped = done.model_copy(update={"outcome": "skipped", "reason": "nothing to list"})
    report = SyncReport(tenant="t", sources=[done, skipped])
    assert report.ok and json.loads(report.model_dump_json())["ok"] is True
    failing = IngestReport(failed=[FailedDocument(uri="x", error="x: bad")])
    report.sources.append(done.model_copy(update={"report": failing}))
    assert not report.ok and len(report.total.failed) == 1
    report.sources[-1] = done.model_copy(update={"outcome": "failed", "reason": "boom"})
    assert not report.ok


def test_an_unknown_source_is_named(tmp_path: Path) -> None:
    from flexmatch import KBConfig
    from flexmatch.sync import chosen_sources

    config = KBConfig.model_validate({"sources": {"default": {}, "notes": {}}})
    assert chosen_sources(config, None, "kb") == ["default", "notes"]
    assert chosen_sources(config, ["notes", "default"], "kb") == ["default", "notes"]
    with pytest.raises(ConfigError, match="no source named 'nope' \\(sources: default, notes\\)"):
        chosen_sources(config, "nope", "kb")


def test_every_document_a_run_reads_lies_within_its_scope(tmp_path: Path) -> None:
    """Prune takes only documents from under the configured paths: each kind of uri a
    run gives (a file, a corpus line, a record by key or by place) must count as there."""
    _notes(tmp_path)
    (tmp_path / "corpus.jsonl").write_text('{"text": "one"}\n{"id": "x", "text": "two"}\n')
    data = tmp_path / "data"
    data.mkdir()
    (data / "keyed.json").write_text(json.dumps({"k": {"text": "keyed"}}))
    (data / "listed.json").write_text(json.dumps([{"text": "listed"}]))
    files = _reader(tmp_path / "kb", paths=["../notes", "../corpus.jsonl"])
    named = ["../data/keyed.json", "../data/listed.json"]
    records = _reader(tmp_path / "kb", "facts", type="records", paths=named)
    for reader in (files, records):
        documents = [i for i in _read(reader) if isinstance(i, Document)]
        scope = reader.scope
        assert documents and scope is not None
        assert all(any(within(d.uri, root) for root in scope) for d in documents), documents
    assert not within(f"{tmp_path}/notes-old/a.md", tmp_path / "notes")
    assert not within(str(data / "keyed.json"), tmp_path / "data" / "keyed")


def test_a_configured_folder_that_lists_no_file_is_noted(tmp_path: Path) -> None:
    _notes(tmp_path)
    (tmp_path / "share").mkdir()
    reader = _reader(tmp_path / "kb", paths=["../notes", "../share"])
    _read(reader)
    assert reader.log.empty == [tmp_path / "share"] and reader.log.incomplete == []


def test_an_unexpected_error_fails_its_source_and_the_next_one_syncs() -> None:
    """A bug in one source (a plug-in's KeyError) is that source's failure, said in one
    line; the sources after it still sync."""
    import asyncio
    from types import SimpleNamespace

    from flexmatch import KBConfig
    from flexmatch.sync import sync_sources

    config = KBConfig(
        sources={"broken": SourceConfig(), "fine": SourceConfig()}, default_source="fine"
    )

    def reader(name: str) -> SimpleNamespace:
        if name == "broken":
            raise KeyError("north")
        return SimpleNamespace(unlisted=None, prunable=False)

    async def ingest(*, source: str, prune: bool, progress: object) -> IngestReport:
        return IngestReport(planned=1)

    report = asyncio.run(
        sync_sources(config, ["broken", "fine"], "default", reader=reader, ingest=ingest)
    )
    broken, fine = report.sources
    assert (broken.outcome, broken.reason) == ("failed", "KeyError: 'north'")
    assert fine.outcome == "done" and fine.report is not None


def test_a_folder_below_a_configured_path_that_holds_no_file_is_noted(tmp_path: Path) -> None:
    """A share mounted below a configured folder, not mounted now: an empty mount point."""
    notes = _notes(tmp_path)
    (notes / "share" / "deeper").mkdir(parents=True)
    reader = _reader(tmp_path / "kb", paths=["../notes"])
    _read(reader)
    assert reader.log.empty == [notes / "share" / "deeper", notes / "share"]
    assert reader.log.incomplete == []


def test_a_records_file_that_changes_while_it_is_read_prunes_nothing(tmp_path: Path) -> None:
    """A records file caught mid-rewrite, cut at a line boundary: the records after the
    cut are not gone, so the run is incomplete."""
    folder = tmp_path / "records"
    folder.mkdir()
    lines = [json.dumps({"id": f"r{n}", "text": f"record {n}"}) + "\n" for n in range(3)]
    path = folder / "facts.jsonl"
    path.write_text(lines[0])  # the writer has written its first line so far
    reader = _reader(tmp_path, "facts", type="records", paths=["records"])
    items = reader.read(reader.plan([]))
    first = next(items)
    assert isinstance(first, Document) and first.id == "r0"
    path.write_text("".join(lines))  # ... and finishes while the file is read
    rest = list(items)
    assert all(isinstance(item, Document) for item in rest)
    assert reader.log.incomplete == [f"{path} changed while it was read"]

    steady = _reader(tmp_path, "facts", type="records", paths=["records"])
    assert len(_read(steady)) == 3 and steady.log.incomplete == []


def test_a_corpus_that_changes_while_it_is_read_prunes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    path = folder / "corpus.jsonl"
    path.write_text('{"id": "a", "text": "one"}\n{"id": "b", "text": "two"}\n')
    reader = _reader(tmp_path, paths=["notes"])
    items = reader.read(reader.plan([]))
    assert isinstance(next(items), Document)
    path.write_text('{"id": "a", "text": "one"}\n')  # rewritten, same inode
    list(items)
    assert reader.log.incomplete == [f"{path} changed while it was read"]
