"""``flexmatch.models``: one package of data shapes at the bottom of the import graph, whose
classes still load from where they were before it was split into modules."""

from __future__ import annotations

import ast
import pickle
import re
import sys
from pathlib import Path

import flexmatch.models
from flexmatch.models import Document, Element, FailedDocument, IngestReport, Location

MODELS = Path(flexmatch.models.__file__).parent


def test_every_exported_name_resolves() -> None:
    assert all(
        getattr(flexmatch.models, name, None) is not None for name in flexmatch.models.__all__
    )


def test_the_models_import_only_each_other_pydantic_and_the_standard_library() -> None:
    """So the package stays the first level of the graph: any module may use it."""
    outside: list[str] = []
    for path in MODELS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                top = name.split(".")[0]
                ok = name.startswith("flexmatch.models") or top in ("pydantic", "__future__")
                if not ok and top not in sys.stdlib_module_names:
                    outside.append(f"{path.name}: {name}")
    assert outside == []


def test_a_pickle_that_names_the_old_module_still_loads() -> None:
    """Objects pickled before the split name ``flexmatch.models.Document`` (Ray and the
    parser workers send models pickled; a worker of the old code may send one)."""
    document = Document(
        id="d1",
        uri="guide.pdf",
        source="docs",
        title="Guide",
        elements=[Element(kind="paragraph", text="Ferries leave at noon.", page=2)],
    )
    report = IngestReport()
    report.record_failed(FailedDocument(uri="broken.pdf", error="broken.pdf: not a PDF"))
    new = pickle.dumps((document, report), protocol=2)  # protocol 2 names classes in text
    assert b"cflexmatch.models.documents\nDocument\n" in new
    old = re.sub(rb"cflexmatch\.models\.\w+\n", b"cflexmatch.models\n", new)
    assert b"cflexmatch.models\nDocument\n" in old
    loaded_document, loaded_report = pickle.loads(old)
    assert loaded_document == document
    assert loaded_document.elements[0].location == Location(page=2)
    assert loaded_report == report
    assert loaded_report.outcomes[0].outcome == "failed"
