"""Results say where they come from, end to end: real files ingested by the Python API
with the real local model, queried, and formatted as the JSON tool result and the facts
block every interface (CLI, HTTP, MCP, agent tool) hands on."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder

STDLIB = Path(posixpath.__file__).parent


def test_a_pdf_result_cites_its_page_and_a_code_result_its_lines(
    tmp_path: Path, embedder: OnnxEmbedder, docs_dir: Path
) -> None:
    pdf = docs_dir / "pdf_list-item-example.pdf"
    code = STDLIB / "posixpath.py"
    lines = code.read_text(encoding="utf-8").split("\n")
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([pdf, code])
        assert report.documents == 2 and not report.failed

        # the answer is on page 2; its chunk (the section "Module Three") runs over both
        first = kb.query("Which prototyping methodologies?", top_n=3)[0]
        assert first.uri.endswith("pdf_list-item-example.pdf")
        assert "Prototyping methodologies" in first.content
        assert first.location is not None
        assert (first.location.page, first.location.page_end) == (1, 2)
        assert first.cite == "pdf_list-item-example.pdf pp. 1-2"

        question = "split a pathname into head and tail"
        found = kb.query(question, top_n=3)
        split = next(r for r in found if r.heading_path[-1:] == ["def split"])
        where = split.location
        assert where is not None and where.line_start and where.line_end
        assert lines[where.line_start - 1] == "def split(p):"
        assert lines[where.line_end - 1] == "    return head, tail"
        assert split.cite == f"posixpath.py:{where.line_start}-{where.line_end}"

        item = json.loads(kb.format(question, [split], "json"))["results"][0]
        assert item["cite"] == split.cite
        assert item["location"] == {"line_start": where.line_start, "line_end": where.line_end}
        facts = kb.format(question, [split], "markdown")
        assert f"cite: {split.cite}" in facts
