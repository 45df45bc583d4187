"""The plug-in spine end to end: one installed package (a dist-info on PYTHONPATH)
registers a chain type, a source type and a parser through its entry points, and the real
CLI ingests and answers with all three; a broken plug-in is named when a setting uses it
and blocks nothing else."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from flexmatch import plugins
from tests.conftest import run, write_config

PLUGIN = '''
"""Shelves: a source type listing *.shelf files, a parser reading them, a chunker."""

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from flexmatch.chains import Chunker
from flexmatch.models import Element, ParsedDocument, Section
from flexmatch.sources import Document, ItemRef, SourceType


def read_shelf(path):
    """'item: place' lines, each said as a sentence."""
    lines = [line.partition(":") for line in Path(path).read_text().splitlines() if line]
    texts = [f"The {item.strip()} is kept {place.strip()}." for item, _, place in lines]
    return ParsedDocument(elements=[Element(kind="paragraph", text=t) for t in texts])


read_shelf.suffixes = [".shelf"]


class ShelfOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    folder: str


class Shelves(SourceType):
    options = ShelfOptions

    def list_items(self, inputs):
        for path in sorted(Path(self.context.options.folder).glob("*.shelf")):
            yield ItemRef(id=f"shelf-{path.stem}", uri=path.as_uri(), data=path)

    def fetch(self, ref):
        parsed = self.context.parse_file(ref.data)
        return Document(
            id=ref.id,
            uri=ref.uri,
            source=self.context.name,
            title=ref.data.stem,
            elements=parsed.elements,
        )


class OneLineEach(Chunker):
    async def run(self, document):
        return [Section(text=e.text) for e in document.elements if e.text]
'''

ENTRY_POINTS = """\
[flexmatch.chains]
one-line-each = fm_shelves:OneLineEach
melted = fm_shelves_gone:Melted

[flexmatch.sources]
shelves = fm_shelves:Shelves
vanished = fm_shelves_gone:Vanished

[flexmatch.parsers]
shelf = fm_shelves:read_shelf
"""


def _site(folder: Path) -> Path:
    """The plug-in package, installed: its module and its dist-info."""
    folder.mkdir(parents=True)
    (folder / "fm_shelves.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    info = folder / "fm_shelves-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fm-shelves\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return folder


def _kb(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    site = _site(tmp_path / "site")
    pantry = tmp_path / "pantry"
    pantry.mkdir()
    (pantry / "kitchen.shelf").write_text(
        "green tea: in the blue tin on the top shelf\n"
        "rice: in the glass jar beside the stove\n"
        "honey: behind the flour in the left cupboard\n"
    )
    kb = tmp_path / "kb"
    write_config(
        kb,
        "sources:\n"
        "  default:\n"
        "    type: shelves\n"
        f"    options: {{folder: '{pantry}'}}\n"
        "    chunker: lines\n"
        "    matching_text: content\n"
        "    qualifying_text: headings\n"
        "query:\n  query_transform: identity\n",
    )
    (kb / "chains").mkdir()
    (kb / "chains" / "lines.yaml").write_text("kind: chunker\ntype: one-line-each\n")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return kb, {"PYTHONPATH": path}


def test_a_plug_in_s_chain_type_source_type_and_parser_ingest_and_answer(
    tmp_path: Path,
) -> None:
    kb, env = _kb(tmp_path)
    done = run("ingest", "--kb", str(kb), "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["added"] == 1 and report["failed"] == [], report
    assert report["chunks"] == 3  # the plug-in chunker: one chunk per line

    asked = run("query", "Where is the honey?", "--kb", str(kb), "--json", env=env)
    assert asked.returncode == 0, asked.stderr
    best = json.loads(asked.stdout)["results"][0]
    # the plug-in parser's sentence, one line alone: its chunker's cut
    assert best["content"] == "The honey is kept behind the flour in the left cupboard."

    listed = run("chains", "--kb", str(kb), "--json", env=env)
    used = {(u["kind"], u["type"]) for u in json.loads(listed.stdout)}
    assert ("chunker", "one-line-each") in used


def test_a_broken_plug_in_is_named_when_used_and_blocks_nothing_else(tmp_path: Path) -> None:
    kb, env = _kb(tmp_path)
    config = (kb / "flexmatch.yaml").read_text()
    write_config(
        kb,
        config.replace("query:\n", "  frozen:\n    type: vanished\nquery:\n"),
    )
    used = run("ingest", "--kb", str(kb), "--source", "frozen", env=env)
    assert used.returncode != 0
    said = " ".join(used.stderr.split())
    assert "source type plug-in 'vanished': 'fm_shelves_gone:Vanished' failed to load" in said
    assert "Traceback" not in used.stderr

    (kb / "chains" / "melt.yaml").write_text("kind: chunker\ntype: melted\n")
    write_config(kb, config.replace("chunker: lines", "chunker: melt"))
    melted = run("ingest", "--kb", str(kb), env=env)
    assert melted.returncode != 0
    said = " ".join(melted.stderr.split())
    assert "chain type plug-in 'melted': 'fm_shelves_gone:Melted' failed to load" in said

    write_config(kb, config)  # the working plug-ins are untouched by the broken ones
    done = run("ingest", "--kb", str(kb), "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == 1


@pytest.mark.usefixtures("fresh_plugins")
def test_a_plug_in_of_the_wrong_shape_is_refused_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flexmatch.engine.chains.registry import CHAIN_TYPES
    from flexmatch.inputs.parsing import PARSER_REGISTRY
    from flexmatch.inputs.sources.types import SOURCE_TYPES

    site = tmp_path / "site"
    site.mkdir()
    (site / "fm_wrong.py").write_text("class Thing:\n    pass\n\nthing = 42\n")
    info = site / "fm_wrong-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fm-wrong\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[flexmatch.chains]\nodd = fm_wrong:Thing\n"
        "[flexmatch.sources]\nodd = fm_wrong:Thing\n"
        "[flexmatch.parsers]\nodd = fm_wrong:thing\n"
    )
    monkeypatch.syspath_prepend(str(site))
    for registry in (CHAIN_TYPES, SOURCE_TYPES, PARSER_REGISTRY):
        assert registry.failures()["odd"].startswith("'fm_wrong:")
        assert "refused" in registry.failures()["odd"]
    assert [h.group for h in plugins.HOOKS] == [
        "flexmatch.chains",
        "flexmatch.sources",
        "flexmatch.parsers",
    ]
