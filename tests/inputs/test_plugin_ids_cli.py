"""A source plug-in installed as a package (an entry point on the path) whose documents
carry an empty or a 100,000-character id: through the real CLI each fails alone, named,
and the good document is stored and listed."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from tests.conftest import run, write_config

PLUGIN = """
from flexmatch.sources import Document, Element, ItemRef, SourceType


class BadIds(SourceType):
    def list_items(self, inputs):
        for name in ("empty", "long", "good"):
            yield ItemRef(id=name, uri=f"ids:{name}", data=name)

    def fetch(self, ref):
        ids = {"empty": "", "long": "x" * 100_000, "good": "good"}
        return Document(
            id=ids[ref.data],
            uri=ref.uri,
            source=self.context.name,
            title=ref.data,
            elements=[Element(kind="paragraph", text=f"The {ref.data} ferry leaves at noon.")],
        )
"""


def plugin_path(folder: Path, module: str, source: str, group: str, target: str) -> Path:
    """``source`` as module ``module`` with an installed distribution's entry point
    (``group``: ``name = target``), in a folder to put on PYTHONPATH."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(source, encoding="utf-8")
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{target}\n")
    return folder


def test_empty_and_huge_document_ids_fail_alone(tmp_path: Path) -> None:
    site = plugin_path(
        tmp_path / "site",
        "badids",
        textwrap.dedent(PLUGIN),
        "flexmatch.sources",
        "badids = badids:BadIds",
    )
    kb = tmp_path / "kb"
    write_config(kb, "sources:\n  default: {}\n  ids:\n    type: badids\n")
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    done = run("ingest", "--kb", str(kb), "--source", "ids", "--json", env=env)
    report = json.loads(done.stdout)
    errors = {f["uri"]: f["error"] for f in report["failed"]}
    assert report["added"] == 1
    assert errors["ids:empty"].endswith("the document id is empty")
    assert errors["ids:long"].endswith("the document id is 100,000 characters, at most 4,096")
    listed = run("docs", "list", "--kb", str(kb), "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [d["id"] for d in json.loads(listed.stdout)] == ["good"]
