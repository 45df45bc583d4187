"""Nothing storable-looking can break the store: every payload is checked before anything
of its document is written, through every input path, and the tenant stays usable.

The engine itself accepts a payload nested deeper than it can decode, and from then on
every read of that tenant fails and the store no longer reopens: these tests write such
inputs through each path and then read, query, ingest and reopen."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.stores.base import StoredPoint
from flexmatch.engine.stores.edge import EdgeStore
from flexmatch.errors import PayloadError
from flexmatch.models import Document, Element
from flexmatch.payloads import (
    MAX_METADATA_BYTES,
    MAX_METADATA_FIELDS,
    check_metadata,
    check_payload,
    check_value,
    derived_metadata,
)
from tests.conftest import examples, run, write_config


def nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


def listed(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (nested(40), "nested more than 32 levels"),
        (listed(40), "nested more"),
        (float("nan"), "not a storable number"),
        (float("-inf"), "not a storable number"),
        (2**64, "outside the 64-bit range"),
        ("a\ud800b", "unpaired surrogate"),
        ({1: "a"}, "field name must be text"),
        (b"bytes", "bytes is not a JSON value"),
        ({"x"}, "set is not a JSON value"),
        (object(), "object is not a JSON value"),
    ],
)
def test_values_the_store_would_not_read_back_are_refused_by_name(value: Any, says: str) -> None:
    with pytest.raises(PayloadError, match=says) as caught:
        check_value({"metadata": {"extra": value}}, "doc.jsonl:1")
    assert str(caught.value).startswith("doc.jsonl:1.metadata.extra")


def test_storable_values_pass_and_report_their_size() -> None:
    value = {"a": "é" * 10, "b": [1, 2.5, True, None], "c": (1, 2), "d": nested(31)}
    assert check_value(value, "w") >= 20
    check_payload({"content": "x" * 100_000}, "w")


def test_a_payload_over_the_size_cap_is_refused() -> None:
    with pytest.raises(PayloadError, match="payload is about"):
        check_payload({"content": "x" * (9 * 1024 * 1024)}, "w")


def test_metadata_is_bounded_in_fields_depth_and_bytes() -> None:
    check_metadata({"author": "Ann", "year": 2024, "tags": ["a", "b"]}, "d")
    with pytest.raises(PayloadError, match="fields, at most"):
        check_metadata({f"f{i}": i for i in range(MAX_METADATA_FIELDS + 1)}, "d")
    with pytest.raises(PayloadError, match="metadata field 'deep'"):
        check_metadata({"deep": nested(9)}, "d")
    with pytest.raises(PayloadError, match="bytes as JSON"):
        check_metadata({"long": "x" * MAX_METADATA_BYTES}, "d")
    with pytest.raises(PayloadError, match="field name"):
        check_metadata({"": 1}, "d")


def test_derived_metadata_keeps_what_fits_and_leaves_the_rest_to_the_text() -> None:
    wide = {f"field{i}": "v" * 50 for i in range(100_000)}
    kept = derived_metadata({"title": "T", "deep": nested(400), "nan": float("nan"), **wide})
    check_metadata({**kept, "record": True}, "d")
    assert kept["title"] == "T" and "deep" not in kept and "nan" not in kept
    assert len(kept) < MAX_METADATA_FIELDS
    assert derived_metadata({"record": 1, "ok": 2}, reserved=("record",)) == {"ok": 2}


def test_the_store_refuses_an_unreadable_point_before_writing_any(tmp_path: Path) -> None:
    """The funnel: a write whose one point is unreadable writes none, and the store
    reopens with what it held (a written deep payload would make it unopenable)."""
    store = EdgeStore(tmp_path / "store")
    store.prepare("m", 4)
    good = StoredPoint(id=str(uuid.uuid4()), vector=[1, 0, 0, 0], text="a", payload={"x": 1})
    store.upsert("t", [good])
    bad = StoredPoint(
        id=str(uuid.uuid4()), vector=[0, 1, 0, 0], text="b", payload={"m": nested(200)}
    )
    other = StoredPoint(id=str(uuid.uuid4()), vector=[0, 0, 1, 0], text="c", payload={"y": 2})
    with pytest.raises(PayloadError, match="nested more than"):
        store.upsert("t", [other, bad])
    store.close()
    reopened = EdgeStore(tmp_path / "store")
    assert [h.id for h in reopened.scroll("t")] == [good.id]
    reopened.close()


POISON = [
    {"_id": "deep", "title": "Deep", "text": "nested", "extra": nested(400)},
    {"_id": "good", "title": "Good", "text": "The first ferry to the island leaves at seven."},
]


def test_a_poisoned_corpus_row_leaves_the_tenant_usable_through_the_cli(tmp_path: Path) -> None:
    """The reported sequence: a corpus whose first row nests 400 levels deep. That row
    fails with its field named; the good row is stored; stats, docs list, query and a
    further ingest all work, in new processes (so the store reopens too)."""
    kb = tmp_path / "kb"
    write_config(kb, "sources:\n  default: {}\n")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in POISON))
    first = run("ingest", "--kb", str(kb), str(corpus))
    said = " ".join((first.stdout + first.stderr).split())
    assert "corpus.jsonl#deep: metadata field 'extra'" in said and "nested more than" in said
    assert "Traceback" not in said
    for command in (["stats"], ["docs", "list"]):
        done = run(*command, "--kb", str(kb))
        assert done.returncode == 0, done.stderr
    listed = run("docs", "list", "--kb", str(kb), "--json")
    assert [d["id"] for d in json.loads(listed.stdout)] == ["good"]
    found = run("query", "--kb", str(kb), "--json", "when does the ferry leave")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["document_id"] == "good"
    (tmp_path / "more.md").write_text("# Tides\n\nHigh tide is at noon on Sundays.\n")
    more = run("ingest", "--kb", str(kb), str(tmp_path / "more.md"))
    assert more.returncode == 0, more.stderr


# -- property tests: hostile values through every input path ----------------------------

hostile_scalars = (
    st.floats()  # NaN and infinities included
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.text(max_size=30)
    | st.just("a\ud800b")
    | st.booleans()
    | st.none()
)
hostile_json = st.one_of(
    st.recursive(
        hostile_scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=12,
    ),
    st.integers(min_value=0, max_value=300).map(nested),
    st.integers(min_value=0, max_value=300).map(lambda d: nested(d, [1])),
)
hostile_metadata = st.dictionaries(st.text(max_size=10), hostile_json, max_size=4)
hostile_names = st.text(
    alphabet=st.characters(blacklist_characters="/\x00"), min_size=1, max_size=300
)
PROPERTIES = settings(
    max_examples=examples(ci=15, explore=50),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
CONFIG = "sources:\n  default: {}\n  facts:\n    type: records\n    id_field: fact_id\n"


@pytest.fixture(scope="module")
def hostile_kb(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Any:
    kb_dir = tmp_path_factory.mktemp("hostile") / "kb"
    write_config(kb_dir, CONFIG)
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        yield kb


def still_usable(kb: KnowledgeBase, tenant: str) -> None:
    """Every read and a further write of the tenant work after the hostile input."""
    kb.stats(tenant=tenant)
    for record in kb.list_documents(tenant=tenant):
        kb.get_document(record.id, tenant=tenant)
    kb.query("when does the ferry leave", tenant=tenant)
    report = kb.run_sync(
        kb.aingest_upload("ferry.md", b"# Ferry\n\nThe ferry leaves at seven.\n", tenant=tenant)
    )
    assert not report.failed, report.failed
    assert any(r.uri.endswith("ferry.md") for r in kb.list_documents(tenant=tenant))


@PROPERTIES
@given(name=hostile_names, metadata=hostile_metadata)
def test_hostile_uploads_never_break_the_tenant(
    hostile_kb: KnowledgeBase, name: str, metadata: dict[str, Any]
) -> None:
    tenant = f"t{uuid.uuid4().hex[:12]}"
    report = hostile_kb.run_sync(
        hostile_kb.aingest_upload(
            name + ".txt", b"Tides turn twice a day.", metadata=metadata, tenant=tenant
        )
    )
    assert report.failed or report.document_ids  # stored, or refused with a reason
    still_usable(hostile_kb, tenant)


@PROPERTIES
@given(record=st.dictionaries(st.text(max_size=10), hostile_json, max_size=5))
def test_hostile_records_never_break_the_tenant(
    hostile_kb: KnowledgeBase, record: dict[str, Any]
) -> None:
    tenant = f"t{uuid.uuid4().hex[:12]}"
    hostile_kb.add_records(
        [{**record, "fact_id": "f1", "note": "tides"}], source="facts", tenant=tenant
    )
    still_usable(hostile_kb, tenant)


@PROPERTIES
@given(rows=st.lists(hostile_metadata, min_size=1, max_size=3))
def test_hostile_corpus_rows_never_break_the_tenant(
    hostile_kb: KnowledgeBase, tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    tenant = f"t{uuid.uuid4().hex[:12]}"
    corpus = tmp_path / f"{tenant}.jsonl"
    lines = []
    for index, row in enumerate(rows):
        row = {k: v for k, v in row.items() if k not in ("_id", "id", "title", "text")}
        try:
            lines.append(json.dumps({**row, "_id": f"r{index}", "text": "Tides turn."}))
        except ValueError:
            continue  # not JSON at all (a circular value cannot be generated; NaN is written)
    corpus.write_text("\n".join(lines) + "\n")
    hostile_kb.ingest([corpus], tenant=tenant)
    still_usable(hostile_kb, tenant)


@PROPERTIES
@given(metadata=hostile_metadata, title=st.text(max_size=50), name=hostile_names)
def test_hostile_plugin_documents_never_break_the_tenant(
    hostile_kb: KnowledgeBase, metadata: dict[str, Any], title: str, name: str
) -> None:
    """What a source plug-in hands over, as it is: any metadata, title or id."""
    tenant = f"t{uuid.uuid4().hex[:12]}"
    document = Document(
        id=name,
        uri=f"plugin://{name}",
        source="default",
        title=title,
        elements=[Element(kind="paragraph", text="Tides turn twice a day.")],
        metadata=metadata,
    )
    report = hostile_kb.run_sync(hostile_kb.aingest_documents([document], tenant=tenant))
    assert report.failed or report.document_ids or report.duplicates
    still_usable(hostile_kb, tenant)


def test_metadata_is_stored_once_per_document_and_points_carry_what_filters_match(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """The whole metadata lives on the document's record; each point holds only what a
    filter can match, so a document's size no longer multiplies by its points."""
    write_config(tmp_path / "kb", "sources:\n  default: {}\n")
    metadata = {
        "team": "ops",
        "year": 2024,
        "tags": ["a", "b"],
        "score": 0.5,
        "owner": {"name": "Ann", "notes": "n" * 4000},
    }
    text = "\n\n".join(
        f"## Part {i}\n\nThe tide tables for harbour {i} change weekly." for i in range(30)
    )
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as kb:
        report = kb.run_sync(kb.aingest_upload("tides.md", text.encode(), metadata=metadata))
        assert not report.failed, report.failed
        points = [h for h in kb.store.scroll("default") if h.payload.get("record") == "match"]
        assert len(points) > 10
        for point in points:
            carried = point.payload["metadata"]
            assert carried["team"] == "ops" and carried["year"] == 2024
            assert carried["tags"] == ["a", "b"] and "owner" not in carried
            assert "score" not in carried
        found = kb.query("tide tables for harbour 7", filters={"team": "ops", "year": 2024})
        assert found and found[0].metadata["owner"]["name"] == "Ann"
        assert found[0].metadata["score"] == 0.5
        assert not kb.query("tide tables", filters={"team": "dev"})


@pytest.mark.parametrize("document_id", ["", "   ", "x" * 100_000])
def test_a_plugin_document_with_an_unusable_id_fails_alone(
    hostile_kb: KnowledgeBase, document_id: str
) -> None:
    tenant = f"t{uuid.uuid4().hex[:12]}"
    good = Document(
        id="fine",
        uri="plugin://fine",
        source="default",
        title="",
        elements=[Element(kind="paragraph", text="Tides turn twice a day.")],
    )
    bad = good.model_copy(update={"id": document_id, "uri": "plugin://bad"})
    report = hostile_kb.run_sync(hostile_kb.aingest_documents([bad, good], tenant=tenant))
    (failed,) = report.failed
    assert "document id is" in failed.error and failed.uri == "plugin://bad"
    assert [r.id for r in hostile_kb.list_documents(tenant=tenant)] == ["fine"]
    still_usable(hostile_kb, tenant)
