"""Records sources: JSON objects, JSON Lines and key/value files through a template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.errors import PromptError
from tests.conftest import write_config

CONFIG = (
    "sources:\n  default: {}\n"
    "  facts:\n    type: records\n    id_field: fact_id\n    title_field: subject\n"
)


def test_agent_records_are_rendered_and_searchable(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, CONFIG)
    facts = [
        {"fact_id": "f1", "subject": "Ann", "prefers": "green tea", "allergies": ["nuts"]},
        {"subject": "Bob", "prefers": "black coffee"},
        "not an object",
    ]
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.add_records(facts, source="facts")
        assert report.added == 2 and "must be a JSON object" in report.failed[0].error
        results = kb.query("What does Ann like to drink?")
        detail = kb.get_document("f1")
        ids = {r.id for r in kb.list_documents(source="facts")}
    assert results[0].document_id == "f1" and results[0].title == "Ann"
    assert "prefers: green tea" in detail.chunks[0].content
    assert "allergies:\n  - nuts" in detail.chunks[0].content
    assert len(ids) == 2 and "f1" in ids  # Bob's record got a content-derived id


def test_jsonl_and_key_value_files(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, CONFIG)
    (tmp_path / "facts.jsonl").write_text(
        json.dumps({"fact_id": "j1", "subject": "Office", "opens": "8 am"}) + "\n{oops\n"
    )
    (tmp_path / "kv.json").write_text(json.dumps({"wifi": "The guest wifi password is harbour42"}))
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.ingest([tmp_path / "facts.jsonl", tmp_path / "kv.json"], source="facts")
        assert report.added == 2 and "not valid JSON" in report.failed[0].error
        results = kb.query("guest wifi password")
    assert results[0].document_id == "wifi"
    assert results[0].content.endswith("wifi: The guest wifi password is harbour42")


def test_template_override_from_the_kb_folder(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, CONFIG.replace("type: records\n", "type: records\n    template: fact\n"))
    (kb_dir / "prompts").mkdir()
    (kb_dir / "prompts" / "fact.j2").write_text(
        "{{ record.subject }} prefers {{ record.prefers }}."
    )
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        kb.add_records([{"fact_id": "x", "subject": "Cy", "prefers": "rooibos"}], source="facts")
        assert kb.get_document("x").chunks[0].content == "Cy prefers rooibos."
    (kb_dir / "prompts" / "fact.j2").write_text("{{ record.subject }} {{ unknown_var }}")
    with (
        KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb,
        pytest.raises(PromptError, match=r"fact\.j2: unknown template variable\(s\) unknown_var"),
    ):
        kb.add_records([{"subject": "Dee"}], source="facts")


def test_a_deeply_nested_record_fails_alone_in_the_cli(tmp_path: Path) -> None:
    """A bulk import keeps going past a record nested hundreds of levels deep (and a line
    of JSON too deep to read): each is one line on stderr, exit code 2, the rest stored."""
    import json

    from tests.conftest import run

    deep: dict = {"id": "deep"}
    cursor = deep
    for _ in range(400):
        cursor["child"] = {}
        cursor = cursor["child"]
    lines = [
        json.dumps({"id": "gate", "title": "Gate", "code": "1234"}),
        json.dumps(deep),
        "[" * 5000 + "]" * 5000,
        json.dumps({"id": "door", "title": "Door", "colour": "red"}),
    ]
    (tmp_path / "facts.jsonl").write_text("\n".join(lines) + "\n")
    write_config(tmp_path / "kb", "sources:\n  default:\n    type: records\n")
    done = run("ingest", "--kb", str(tmp_path / "kb"), str(tmp_path / "facts.jsonl"))
    assert done.returncode == 2, done.stderr
    errors = " ".join(done.stderr.split())
    assert "facts.jsonl:2: the record nests deeper than 32 levels" in errors
    assert "facts.jsonl:3: the JSON nests too deeply" in errors
    assert "Traceback" not in done.stderr and "Ingested 2 documents" in done.stdout
