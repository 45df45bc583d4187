"""Inputs at their edges: ids of every JSON type, ids repeated in one batch, a UTF-8 BOM,
long file names, and YAML or JSON nested deeper than any parser should be asked to go."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.errors import ConfigError, ParseError
from flexmatch.inputs.parsing import parse_file
from flexmatch.inputs.parsing.code import MAX_NESTING, nesting_depth
from flexmatch.inputs.sources.files import LoadTask, load
from flexmatch.inputs.sources.records import entries_in_file
from flexmatch.models import Document, FailedDocument
from flexmatch.service import safe_filename
from flexmatch.yamlio import MAX_YAML_DEPTH, read_yaml
from tests.conftest import write_config

BOM = b"\xef\xbb\xbf"
RECORDS_CONFIG = (
    "sources:\n  default: {}\n"
    "  facts:\n    type: records\n    id_field: fact_id\n    title_field: subject\n"
)


def corpus(tmp_path: Path, *rows: object, prefix: bytes = b"") -> list[Document | FailedDocument]:
    path = tmp_path / "corpus.jsonl"
    lines = [json.dumps(row) if not isinstance(row, bytes) else row.decode() for row in rows]
    path.write_bytes(prefix + "\n".join(lines).encode() + b"\n")
    return list(load(LoadTask(path), "default", 10_000_000))


def row(given: object, text: str = "Otters hold hands while they sleep.") -> dict[str, object]:
    return {"_id": given, "title": "T", "text": text}


# -- ids ---------------------------------------------------------------------------------
def test_corpus_ids_are_strings_or_integers_and_a_repeat_is_reported(tmp_path: Path) -> None:
    items = corpus(
        tmp_path,
        row(1),
        row("1"),  # the same id as the row above: reported, not a silent replacement
        row(True),
        row("True"),
        row({"a": 1}),
        row([1]),
        row(1.5),
        row(""),  # empty: no id of its own, one is derived from where the row is
    )
    first, repeat, boolean, true_text, obj, lst, decimal, empty = items
    assert isinstance(first, Document) and first.id == "1"
    assert isinstance(repeat, FailedDocument)
    assert repeat.error == (
        f"{tmp_path}/corpus.jsonl:2: id '1' is already used by {tmp_path}/corpus.jsonl:1 "
        'in the same batch; ids must be unique (1 and "1" are the same id)'
    )
    assert isinstance(true_text, Document) and true_text.id == "True"
    for failed, kind in (
        (boolean, "a boolean"),
        (obj, "an object"),
        (lst, "a list"),
        (decimal, "a decimal number"),
    ):
        assert isinstance(failed, FailedDocument), failed
        assert failed.error.endswith(f"the id ('_id') must be a string or an integer, not {kind}")
        assert "{'a'" not in failed.error  # never a Python repr as a name
    assert isinstance(empty, Document) and len(empty.id) == 24


def test_a_5000_digit_integer_fails_its_row_alone(tmp_path: Path) -> None:
    huge = b'{"_id": 1, "title": "T", "text": "Big", "n": ' + b"9" * 5_000 + b"}"
    bad, good = corpus(tmp_path, huge, row(2))
    assert isinstance(bad, FailedDocument) and "corpus.jsonl:1: not readable JSON" in bad.error
    assert isinstance(good, Document) and good.id == "2"


def test_records_ids_collide_by_value_and_are_reported(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, RECORDS_CONFIG)
    facts = [
        {"fact_id": 1, "subject": "Ann", "prefers": "green tea"},
        {"fact_id": "1", "subject": "Bob", "prefers": "black coffee"},
        {"fact_id": True, "subject": "Cy", "prefers": "water"},
        {"fact_id": {"nested": 1}, "subject": "Di", "prefers": "juice"},
        {"fact_id": "True", "subject": "Ed", "prefers": "milk"},
    ]
    path = tmp_path / "facts.json"
    path.write_bytes(BOM + json.dumps(facts).encode())  # and a BOM is no error
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.ingest([path], source="facts")
        stored = {r.id: r.title for r in kb.list_documents(source="facts")}
    assert stored == {"1": "Ann", "True": "Ed"}  # Ann kept: Bob's repeat did not replace her
    errors = sorted(f.error for f in report.failed)
    assert errors == [
        f"{path}[1]: id '1' is already used by {path}[0] in the same batch; "
        'ids must be unique (1 and "1" are the same id)',
        f"{path}[2]: the id ('fact_id') must be a string or an integer, not a boolean",
        f"{path}[3]: the id ('fact_id') must be a string or an integer, not an object",
    ]


# -- BOM -----------------------------------------------------------------------------------
def test_a_bom_does_not_fail_the_first_row(tmp_path: Path) -> None:
    items = corpus(tmp_path, row("a"), row("b"), prefix=BOM)
    assert [i.id for i in items if isinstance(i, Document)] == ["a", "b"], items
    records = tmp_path / "facts.jsonl"
    records.write_bytes(BOM + b'{"fact_id": "x", "subject": "S"}\n')
    ((_, record, _),) = list(entries_in_file(records))  # type: ignore[misc]
    assert record == {"fact_id": "x", "subject": "S"}
    config = tmp_path / "flexmatch.yaml"
    config.write_bytes(BOM + b"sources:\n  default: {}\n")
    assert read_yaml(config) == {"sources": {"default": {}}}


# -- file names ----------------------------------------------------------------------------
def test_long_file_names_sharing_200_bytes_stay_distinct() -> None:
    shared = "report-" + "x" * 300
    first, second = safe_filename(shared + "-q1.pdf"), safe_filename(shared + "-q2.pdf")
    assert first != second
    for name in (first, second):
        assert len(name.encode()) <= 200 and name.endswith(".pdf") and name.startswith("report-")
    assert safe_filename(shared + "-q1.pdf") == first  # stable: the same name, the same cut
    assert safe_filename("ü" * 2_000 + ".md").endswith(".md")
    assert len(safe_filename("ü" * 2_000 + ".md").encode()) <= 200
    assert safe_filename("short.md") == "short.md"  # short names are kept as sent


# -- nesting -------------------------------------------------------------------------------
def block_yaml(levels: int) -> str:
    return "".join("  " * i + f"k{i}:\n" for i in range(levels)) + "  " * levels + "v: 1\n"


def seq_yaml(levels: int) -> str:
    return "".join(" " * (3 * i) + f"- k{i}:\n" for i in range(levels)) + "\n"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.yaml", block_yaml(3_000)),
        ("deep-seq.yaml", seq_yaml(300)),
        ("inline.yaml", "- " * 3_000 + "x\n"),
        # on lines of their own: one long line with hardly a space is refused as minified
        ("deep.json", '{"a":\n' * 3_000 + "1" + "}\n" * 3_000),
        ("deep-list.json", "[\n" * 3_000 + "]\n" * 3_000),
    ],
)
def test_deep_yaml_and_json_are_refused_by_name(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ParseError) as caught:
        parse_file(path)
    assert str(caught.value) == f"{path}: nested too deeply (over {MAX_NESTING} levels)"


def test_nesting_within_the_limit_parses(tmp_path: Path) -> None:
    for name, text in (
        ("ok.yaml", block_yaml(MAX_NESTING - 1)),
        ("ok.json", '{"a": ' * MAX_NESTING + '"[{ in a string"' + "}" * MAX_NESTING),
    ):
        assert nesting_depth(text, name.split(".")[1]) == MAX_NESTING, name
        path = tmp_path / name
        path.write_text(text)
        assert parse_file(path).title == name


def test_the_yaml_grammar_would_crash_where_the_limit_stops_it() -> None:
    """Why the limit exists: tree-sitter's YAML scanner kills its process (SIGSEGV) on
    a few hundred indentation levels; the depth check stops such input first."""
    probe = (
        "import sys\n"
        "from tree_sitter import Parser\n"
        "from tree_sitter_language_pack import get_language\n"
        "Parser(get_language('yaml')).parse(sys.stdin.buffer.read())\n"
    )
    text = block_yaml(400)
    run = subprocess.run([sys.executable, "-c", probe], input=text.encode(), timeout=60)
    assert run.returncode != 0  # the grammar itself dies on it ...
    assert nesting_depth(text, "yaml") > MAX_NESTING  # ... so it never gets to see it


def test_a_deep_config_file_is_a_clear_error(tmp_path: Path) -> None:
    for text in (block_yaml(3_000), "a: " + "[" * 3_000 + "1" + "]" * 3_000 + "\n"):
        path = tmp_path / "flexmatch.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError) as caught:
            read_yaml(path)
        assert str(caught.value) == f"{path}: nested too deeply (over {MAX_YAML_DEPTH} levels)"


def test_a_deep_yaml_fails_alone_in_an_ingest_with_its_own_reason(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """Through the parse workers: the file is refused by name, not reported as a worker
    that died for want of memory, and the file next to it is stored."""
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, "sources:\n  default: {}\n")
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "deep.yaml").write_text(block_yaml(3_000))
    (folder / "fine.yaml").write_text("server:\n  port: 8080\n  host: example.org\n")
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.ingest([folder])
    assert report.added == 1
    (failed,) = report.failed
    assert failed.error == f"{folder / 'deep.yaml'}: nested too deeply (over {MAX_NESTING} levels)"


def test_identical_records_without_an_id_are_one_document(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, RECORDS_CONFIG)
    same = {"subject": "Ann", "prefers": "green tea"}
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        report = kb.add_records([same, dict(same)], source="facts")
        stored = kb.list_documents(source="facts")
    assert report.failed == [] and len(stored) == 1  # the same content: no collision
