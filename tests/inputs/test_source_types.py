"""Source types as plug-ins: the registry, the built-ins registered through it, a
plug-in's options, mistakes named, and a third-party package installed and ingested
through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from flexmatch import ConfigError, KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.inputs.sources import types
from flexmatch.sources import Document, Element, ItemRef, SourceType, register, registered
from tests.conftest import REPO, run, run_installed, write_config


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topics: list[str]
    broken: bool = False


fetched: list[str] = []  # what the in-process plug-in was asked to fetch


@register("test_topics")
class Topics(SourceType):
    """One document per topic named in the options; the topic's text is its version."""

    options = _Options

    def list_items(self, inputs: list[str]) -> Iterator[ItemRef]:
        for topic in [*self.context.options.topics, *inputs]:
            yield ItemRef(id=f"topic-{topic}", uri=f"topics:{topic}", version=topic, data=topic)

    def fetch(self, ref: ItemRef) -> Iterable[object]:
        fetched.append(ref.data)
        if ref.data == "boom":
            raise RuntimeError("the topic server is down")
        if ref.data == "odd":
            return ["not a document"]
        text = f"All about {ref.data}: what it is, and where to find it in the harbour."
        return [
            Document(
                id=ref.id,
                uri=ref.uri,
                source=self.context.name,
                title=ref.data,
                elements=[Element(kind="paragraph", text=text)],
            )
        ]


def _topics_config(kb_dir: Path, options: str) -> None:
    write_config(kb_dir, f"sources:\n  default: {{}}\n  topics:\n    type: test_topics\n{options}")


def test_the_built_ins_are_registered_as_pyproject_declares() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    declared = pyproject["project"]["entry-points"][types.ENTRY_POINT_GROUP]
    assert declared == types.BUILTIN
    assert {"files", "records", "web", "test_topics"} <= set(registered())


def test_an_unknown_type_is_named_with_the_known_ones(tmp_path: Path) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, "sources:\n  default: {}\n  feeds:\n    type: rss\n")
    done = run("ingest", "--kb", str(kb_dir), "--source", "feeds")
    assert done.returncode != 0
    message = " ".join(done.stderr.split())
    assert "sources.feeds: field 'type': no source type 'rss'" in message
    assert "known source types: files, git, records," in message and ", web" in message


def test_options_are_checked_by_the_type(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    kb_dir = tmp_path / "kb"
    _topics_config(kb_dir, "    options: {topics: [ferries], colour: blue}\n")
    wrong = r"sources.topics \(options\): field 'colour'"
    with (
        KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb,
        pytest.raises(ConfigError, match=wrong),
    ):
        kb.ingest(source="topics")
    write_config(kb_dir, "sources:\n  default:\n    options: {depth: 2}\n")
    with pytest.raises(ConfigError, match="source type 'files' has no option 'depth'"):
        KnowledgeBase.open(kb_dir, embedder=embedder, env={})


def test_a_plug_in_ingests_and_its_version_hint_skips_unchanged_items(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    _topics_config(kb_dir, "    options: {topics: [ferries, lighthouse]}\n")
    fetched.clear()
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        first = kb.ingest(source="topics")
        assert first.added == 2 and fetched == ["ferries", "lighthouse"]
        second = kb.ingest(["boom", "odd"], source="topics")
        records = {r.id: r for r in kb.list_documents(source="topics")}
    assert fetched[2:] == ["boom", "odd"]  # the two known topics were not fetched again
    assert second.unchanged == 2 and second.not_modified == 2
    errors = sorted(f.error for f in second.failed)
    assert errors == [
        "topics:boom: RuntimeError: the topic server is down",
        "topics:odd: the source type returned str, not a document",
    ]
    assert records["topic-ferries"].metadata == {"source_version": "ferries"}


@pytest.mark.usefixtures("fresh_plugins")
def test_a_broken_plug_in_is_named_and_the_others_still_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real installed distribution (dist-info on sys.path) whose module fails to import."""
    (tmp_path / "fm_broken_source.py").write_text("raise ImportError('no module named feedkit')\n")
    info = tmp_path / "fm_broken_source-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fm-broken-source\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[flexmatch.sources]\nfeeds = fm_broken_source:Feeds\nfiles = fm_broken_source:Files\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="plug-in 'feeds': 'fm_broken_source:Feeds' failed"):
        types.source_type("feeds", "flexmatch.yaml: sources.news")
    # a plug-in cannot take a built-in's name: files is still the built-in
    assert types.source_type("files", "x").__name__ == "FilesSource"


PLUGIN = '''
"""A FlexMatch source type: the notes in a folder, one document each."""

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from flexmatch.sources import Document, Element, ItemRef, SourceType


class NotesOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    folder: str


class NotesSource(SourceType):
    options = NotesOptions
    prunable = True

    def list_items(self, inputs):
        for path in sorted(Path(self.context.options.folder).glob("*.note")):
            version = str(path.stat().st_mtime_ns)
            yield ItemRef(id=f"note-{path.stem}", uri=path.as_uri(), version=version, data=path)

    def fetch(self, ref):
        title, _, body = ref.data.read_text().partition("\\n")
        return Document(
            id=ref.id,
            uri=ref.uri,
            source=self.context.name,
            title=title,
            elements=[Element(kind="title", text=title), Element(kind="paragraph", text=body)],
        )
'''

PLUGIN_PYPROJECT = """
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "fm-notes-source"
version = "0.1.0"

[project.entry-points."flexmatch.sources"]
notes = "fm_notes_source:NotesSource"

[tool.hatch.build.targets.wheel]
packages = ["fm_notes_source"]
"""

SCRIPT = """
import json, sys
from importlib.metadata import entry_points
import flexmatch
from flexmatch.adapters.cli.app import main

print(json.dumps({
    "flexmatch": flexmatch.__file__,
    "entry_points": sorted(e.name for e in entry_points(group="flexmatch.sources")),
}))
for args in (["--prune"], []):
    sys.argv = ["flexmatch", "ingest", "--kb", "kb", "--source", "notes", "--json", *args]
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
"""


def test_a_third_party_source_type_installs_and_ingests_through_the_cli(
    tmp_path: Path, wheel: Path
) -> None:
    project = tmp_path / "fm-notes"
    (project / "fm_notes_source").mkdir(parents=True)
    (project / "fm_notes_source" / "__init__.py").write_text(PLUGIN)
    (project / "pyproject.toml").write_text(PLUGIN_PYPROJECT)
    folder = tmp_path / "run"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*install, "-q", "--target", str(folder / "site"), str(project)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    notes = folder / "notes"
    notes.mkdir()
    (notes / "tides.note").write_text("Tides\nHigh tide at the harbour is at noon today.\n")
    (notes / "fish.note").write_text("Fish market\nThe fish market opens at five on Fridays.\n")
    write_config(
        folder / "kb",
        "sources:\n  default: {}\n  notes:\n    type: notes\n"
        f"    options: {{folder: '{notes}'}}\n",
    )
    done = run_installed(wheel, folder, textwrap.dedent(SCRIPT))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    where = json.loads(lines[0])
    assert where["flexmatch"].startswith(str(folder / "site"))  # the installed wheel
    assert where["entry_points"] == ["files", "git", "notes", "records", "web"]
    first, second = (json.loads(part) for part in _json_documents("\n".join(lines[1:])))
    assert first["added"] == 2 and first["removed"] == [] and first["failed"] == []
    assert second["unchanged"] == 2 and second["not_modified"] == 2


def _json_documents(text: str) -> Iterator[str]:
    """The JSON reports the CLI printed one after the other."""
    decoder = json.JSONDecoder()
    index = 0
    while index < len(text):
        if text[index].isspace():
            index += 1
            continue
        value, end = decoder.raw_decode(text, index)
        yield json.dumps(value)
        index = end


def test_unchanged_files_are_not_parsed_again(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    past = 1_700_000_000  # an hour is enough: a file modified just now is not trusted
    for name, text in (("tides", "High tide is at noon."), ("fish", "The market opens at five.")):
        (folder / f"{name}.md").write_text(f"# {name}\n\n{text}\n")
        os.utime(folder / f"{name}.md", (past, past))
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        assert kb.ingest([folder]).added == 2
        again = kb.ingest([folder])
        assert again.unchanged == 2 and again.not_modified == 2
        (folder / "fish.md").write_text("# fish\n\nThe market opens at six.\n")
        os.utime(folder / "fish.md", (past + 60, past + 60))
        (folder / "tides.md").touch()  # modified just now: read again, found unchanged
        third = kb.ingest([folder])
    assert third.changed == 1 and third.unchanged == 1 and third.not_modified == 0


@register("test_notes")
class _Notes(SourceType):
    """Names its items by file stem only: two sources of this type collide on ids."""

    def list_items(self, inputs: list[str]) -> Iterator[ItemRef]:
        for path in sorted(Path(inputs[0]).glob("*.note")):  # no inputs: IndexError
            yield ItemRef(id=path.stem, uri=path.as_uri(), data=path)

    def fetch(self, ref: ItemRef) -> Document:
        text = ref.data.read_text(encoding="utf-8")
        return Document(
            id=ref.id,
            uri=ref.uri,
            source=self.context.name,
            title=ref.id,
            elements=[Element(kind="paragraph", text=text)],
        )


def test_one_source_never_replaces_another_sources_document(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(
        kb_dir, "default_source: a\nsources:\n  a: {type: test_notes}\n  b: {type: test_notes}\n"
    )
    for team, text in (("a", "Team A deploys on Mondays."), ("b", "Team B deploys on Fridays.")):
        (tmp_path / team).mkdir()
        (tmp_path / team / "todo.note").write_text(text, encoding="utf-8")
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        assert kb.ingest([tmp_path / "a"], source="a").added == 1
        report = kb.ingest([tmp_path / "b"], source="b")
        assert report.added == report.changed == 0
        assert "already belongs to source 'a'" in report.failed[0].error
        assert [(d.id, d.source) for d in kb.list_documents()] == [("todo", "a")]
        assert "Mondays" in kb.query("When does the team deploy?")[0].content
        # a plug-in that breaks while listing: one failure naming the source, no traceback
        broken = kb.ingest([], source="b")
        assert broken.failed[0].error.startswith(
            "listing the items of source 'b' (type 'test_notes') failed: IndexError"
        )


@register("test_garbage")
class _Garbage(SourceType):
    """Lists and fetches what a careless plug-in might: wrong entries, documents that name
    another source, a dict for a document; one good item among them (two the first time)."""

    prunable = True
    runs = 0

    def list_items(self, inputs: list[str]) -> Iterator[object]:
        _Garbage.runs += 1
        if _Garbage.runs == 1:
            yield ItemRef(id="g-first", uri="garbage:first", data="first")
        yield 42
        yield None
        yield ItemRef(id=None, uri=None)  # type: ignore[arg-type]
        yield ItemRef(id="", uri="garbage:empty")
        for name in ("ok", "nowhere", "default", "dict"):
            yield ItemRef(id=f"g-{name}", uri=f"garbage:{name}", data=name)

    def fetch(self, ref: ItemRef) -> object:
        if ref.data == "dict":
            return {"id": ref.id, "uri": ref.uri}
        source = self.context.name if ref.data in ("ok", "first") else ref.data
        return Document(
            id=ref.id,
            uri=ref.uri,
            source=source,
            title=ref.data,
            elements=[Element(kind="paragraph", text=f"The {ref.data} keeper rows out at dawn.")],
        )


def test_a_plug_in_s_wrong_entries_fail_alone(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, "sources:\n  default: {}\n  junk:\n    type: test_garbage\n")
    _Garbage.runs = 0
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        assert kb.ingest(source="junk").added == 2
        # g-first is no longer listed, but the listing was not all items: nothing pruned
        report = kb.ingest(source="junk", prune=True)
        stored = [(d.id, d.source, d.status) for d in kb.list_documents()]
    assert report.unchanged == 1 and report.removed == []
    assert stored == [("g-first", "junk", "complete"), ("g-ok", "junk", "complete")]
    what = "source 'junk' (type 'test_garbage')"
    # the first reasons, then how many more (items that failed and were never stored)
    assert report.warnings == [
        f"not pruned: {what} listed something that is not an item; garbage:nowhere could "
        "not be read; garbage:default could not be read; and 1 more"
    ]
    wrong = "(id and uri are non-empty strings, version a string or None, count a whole number)"
    assert [f.error for f in report.failed[:2]] == [
        f"{what} listed int, not an ItemRef or a document",
        f"{what} listed NoneType, not an ItemRef or a document",
    ]
    errors = {f.uri: f.error for f in report.failed[2:]}
    assert errors == {
        "source:junk": f"{what} listed an item with a wrong id None, uri None {wrong}",
        "garbage:empty": f"{what} listed an item with a wrong id '' {wrong}",
        "garbage:nowhere": "garbage:nowhere: source type 'test_garbage' of source 'junk' "
        "returned document 'g-nowhere' of source 'nowhere'; a source's documents name it "
        "as their source",
        "garbage:default": "garbage:default: source type 'test_garbage' of source 'junk' "
        "returned document 'g-default' of source 'default'; a source's documents name it "
        "as their source",
        "garbage:dict": "garbage:dict: the source type returned dict, not a document",
    }
