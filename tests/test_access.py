"""Per-document access control: every result, listing, count, detail and download is one
the asking principal may read, through the Python API, the CLI and a real ``flexmatch
serve``; knowledge bases without access lists answer as before; an access-only change
re-embeds nothing."""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexmatch import Access, KnowledgeBase, Principal
from flexmatch.access import describe, parse_access, readable
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.errors import ConfigError, DocumentNotFoundError
from flexmatch.models import Document, Element
from flexmatch.service import ApiKey, KeyStore, key_identity
from flexmatch.testing import FakeLLMServer
from tests.conftest import llm_config, run, write_config
from tests.serving import KB_CONFIG, Served, served_kb

USERS = ["alice", "bob", "carol"]
GROUPS = ["hr", "eng", "ops"]
TOPICS = ["salary bands", "deploy windows", "holiday rota", "server racks", "pension plan"]
TENANT = "acme"
QUERY = "orchard memo"

accesses = st.none() | st.builds(
    Access,
    public=st.booleans(),
    principals=st.lists(
        st.sampled_from([f"user:{u}" for u in USERS] + [f"group:{g}" for g in GROUPS]),
        max_size=3,
    ),
)
principals = st.builds(
    Principal,
    user=st.none() | st.sampled_from(USERS),
    groups=st.lists(st.sampled_from(GROUPS), max_size=2).map(tuple),
)


def may_read(access: Access | None, who: Principal | None) -> bool:
    """The rules, written out apart from the code under test."""
    if who is None or access is None or access.public:
        return True
    named = {f"user:{who.user}"} if who.user else set()
    named |= {f"group:{g}" for g in who.groups}
    return bool(named & set(access.principals))


def memo(index: int, access: Access | None) -> dict[str, Any]:
    """A record every query for ``QUERY`` finds, distinct from every other."""
    topic = TOPICS[index % len(TOPICS)]
    record: dict[str, Any] = {
        "id": f"memo-{index}",
        "title": f"Orchard memo {index}",
        "text": f"Orchard memo number {index} is about the {topic} of team {index * 7 + 3}.",
    }
    if access is not None:
        record["access"] = access.model_dump()
    return record


# -- the rules ------------------------------------------------------------------------
def test_principal_and_access_parse_and_refuse_clearly() -> None:
    who = Principal.parse("user:alice", ["group:hr", "eng", "eng"])
    assert who.user == "alice" and who.groups == ("eng", "hr")
    assert who.tokens() == ["public", "user:alice", "group:eng", "group:hr"]
    assert parse_access("public", "x").tokens() == ["public"]
    assert parse_access(["group:hr"], "x").tokens() == ["group:hr"]
    # no one named and not public: admins only (never an empty list, which reads as "all")
    assert parse_access({"public": False}, "x").tokens() == ["nobody"]
    with pytest.raises(ConfigError, match=r"hr.csv: access .*'user:NAME' or 'group:NAME'"):
        parse_access({"principals": ["hr"]}, "hr.csv")
    with pytest.raises(ConfigError, match="principal"):
        Principal.parse("user:al ice")
    assert describe(None) == "everyone in the tenant (no access list)"
    assert describe(["group:hr", "user:bob"]) == "group:hr, user:bob"
    assert describe(["nobody"]) == "admins only"


@given(accesses, principals)
def test_readable_matches_the_rules(access: Access | None, who: Principal) -> None:
    assert readable(access.tokens() if access else None, who) == may_read(access, who)
    assert readable(access.tokens() if access else None, None)  # the admin's view


def test_a_missing_identity_never_widens_access() -> None:
    """Unbound keys and a service key naming nobody read as ``Principal()``; a person's
    key cannot name another; admins see everything or search as someone."""

    def key(permissions: list[str], identity: Any = None) -> ApiKey:
        return ApiKey(
            id="0" * 12, tenant="t", permissions=permissions, created_at="", identity=identity
        )

    alice = Principal(user="alice", groups=("hr",))
    assert key(["read"]).reader(None) == Principal()
    service = key(["read"], key_identity(service=True))
    assert service.reader(None) == Principal() and service.reader(alice) == alice
    person = key(["read"], key_identity("user:alice", ["hr"]))
    assert person.reader(None) == alice and person.reader(alice) == alice
    with pytest.raises(Exception, match="only a service or admin key may name"):
        person.reader(Principal(user="bob"))
    assert key(["admin"]).reader(None) is None and key(["admin"]).reader(alice) == alice


# -- the Python API -------------------------------------------------------------------
@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[KnowledgeBase]:
    with KnowledgeBase.open(tmp_path_factory.mktemp("access") / "kb", embedder=embedder) as base:
        yield base


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(accesses, min_size=1, max_size=6), st.lists(principals, min_size=1, max_size=4))
def test_property_nothing_unreadable_is_returned_listed_counted_or_shown(
    kb: KnowledgeBase, documents: list[Access | None], askers: list[Principal]
) -> None:
    tenant = uuid.uuid4().hex[:12]
    report = kb.add_records([memo(i, a) for i, a in enumerate(documents)], tenant=tenant)
    assert not report.failed and report.documents == len(documents)
    access = {f"memo-{i}": a for i, a in enumerate(documents)}
    for who in askers:
        allowed = {d for d, a in access.items() if may_read(a, who)}
        found = {r.document_id for r in kb.query(QUERY, top_n=50, tenant=tenant, principal=who)}
        assert found == allowed  # none it may not read, and the top-K is full
        similar = kb.run_sync(kb.asimilar(QUERY, top_n=50, tenant=tenant, principal=who))
        assert {r.document_id for r in similar} == allowed
        assert {r.id for r in kb.list_documents(tenant=tenant, principal=who)} == allowed
        assert kb.stats(tenant=tenant, principal=who).documents == len(allowed)
        for document_id in access:
            if document_id in allowed:
                assert kb.get_document(document_id, tenant=tenant, principal=who).chunks
            else:
                with pytest.raises(DocumentNotFoundError, match=f"no document '{document_id}'"):
                    kb.get_document(document_id, tenant=tenant, principal=who)
    everything = {r.document_id for r in kb.query(QUERY, top_n=50, tenant=tenant)}
    assert everything == set(access)  # no principal: the admin's view


def test_changing_only_access_rewrites_payloads_not_vectors(kb: KnowledgeBase) -> None:
    tenant = uuid.uuid4().hex[:12]
    kb.add_records([memo(1, Access(principals=["group:hr"]))], tenant=tenant)
    before = kb.registry.get(tenant, "memo-1")
    ids = {h.id for h in kb.store.scroll(tenant, {"record": "match"})}
    again = kb.add_records([memo(1, Access(principals=["user:bob"]))], tenant=tenant)
    assert again.unchanged == 1 and again.documents == 0 and again.usage.calls == 0
    after = kb.registry.get(tenant, "memo-1")
    assert after is not None and before is not None
    assert after.version == before.version and after.access == ["user:bob"]
    points = kb.store.scroll(tenant, {"record": "match"})
    assert {h.id for h in points} == ids  # the same points, not a new version
    assert all(h.payload["access"] == ["user:bob"] for h in points)
    bob, hr = Principal(user="bob"), Principal(groups=("hr",))
    assert [r.document_id for r in kb.query(QUERY, tenant=tenant, principal=bob)] == ["memo-1"]
    assert kb.query(QUERY, tenant=tenant, principal=hr) == []
    # an admin opens it to the whole tenant, then closes it again
    kb.set_access("memo-1", None, tenant=tenant)
    assert [r.document_id for r in kb.query(QUERY, tenant=tenant, principal=hr)] == ["memo-1"]
    kb.set_access("memo-1", Access(public=False), tenant=tenant)
    assert kb.query(QUERY, tenant=tenant, principal=bob) == []
    assert kb.registry.get(tenant, "memo-1").version == before.version  # type: ignore[union-attr]


def test_duplicates_count_only_between_documents_of_the_same_access(kb: KnowledgeBase) -> None:
    """A document is never skipped for a copy its readers cannot read."""
    tenant = uuid.uuid4().hex[:12]
    text = "The orchard memo on pension plans: contributions double in March."

    def copy(document_id: str, group: str) -> Document:
        element = Element(kind="paragraph", text=text)
        metadata = {"access": [f"group:{group}"]}
        return Document(
            id=document_id,
            uri=f"{document_id}.txt",
            source="default",
            title="",
            elements=[element],
            metadata=metadata,
        )

    first = kb.run_sync(kb.aingest_documents([copy("hr", "hr")], tenant=tenant))
    assert first.document_ids == ["hr"]
    documents = [copy("eng", "eng"), copy("eng-copy", "eng")]  # one stored, one in this run
    report = kb.run_sync(kb.aingest_documents(documents, tenant=tenant))
    assert report.document_ids == ["eng"]
    assert [d.document_id for d in report.duplicates] == ["eng-copy"]
    later = kb.run_sync(kb.aingest_documents([copy("hr-copy", "hr")], tenant=tenant))
    # a restricted twin is never named: the writer may not be one of its readers
    reason = later.duplicates[0].reason
    assert reason == "same content as a document already stored with the same access"
    assert "hr" not in reason and "eng" not in str(report.duplicates[0].reason)
    for group in ("hr", "eng"):
        found = kb.query(QUERY, tenant=tenant, principal=Principal(groups=(group,)))
        assert [r.document_id for r in found] == [group]
    opened = [copy("open", "hr").model_copy(update={"metadata": {"access": "public"}})]
    kb.run_sync(kb.aingest_documents(opened, tenant=tenant))
    twin = [copy("open-copy", "hr").model_copy(update={"metadata": {"access": "public"}})]
    named = kb.run_sync(kb.aingest_documents(twin, tenant=tenant)).duplicates[0].reason
    assert named == "same content as document open (open.txt)"  # the whole tenant reads it


def test_the_agent_tool_searches_as_the_person_the_application_names(kb: KnowledgeBase) -> None:
    """The agent's search tool reads as the principal its application binds; the model
    cannot name one (an unknown argument is refused)."""
    import json

    from flexmatch.adapters.agent import handle_tool_call

    tenant = uuid.uuid4().hex[:12]
    kb.add_records([memo(0, Access(principals=["group:hr"])), memo(1, None)], tenant=tenant)

    def found(who: Principal | None, **extra: Any) -> Any:
        arguments = {"query": QUERY, "top_n": 20, **extra}
        call = handle_tool_call(kb, "search_knowledge", arguments, tenant, principal=who)
        return json.loads(kb.run_sync(call))

    def ids(answer: Any) -> set[str]:
        return {r["document_id"] for r in answer["results"]}

    assert ids(found(Principal(user="bob"))) == {"memo-1"}
    assert ids(found(Principal(groups=("hr",)))) == {"memo-0", "memo-1"}
    refused = found(Principal(user="bob"), principal={"groups": ["hr"]})
    assert "error" in refused and "principal" in refused["error"]


def test_source_default_and_path_rules(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    """Rules match a file's place in the folder ingested, never its absolute path: the
    documents live under a folder named ``hr`` here, and ``*/hr/*`` matches none of them;
    a name with a space matches as written."""
    folder = tmp_path / "hr" / "docs"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "pay.md").write_text("# Pay\n\nThe orchard memo on pay rises.\n")
    (folder / "notes.md").write_text("# Notes\n\nThe orchard memo on team lunches.\n")
    (folder / "pay review.md").write_text("# Review\n\nThe orchard memo on reviews.\n")
    config = (
        "sources:\n  default:\n    access: {principals: ['group:staff']}\n"
        "    access_rules:\n      'hr/*': {principals: ['group:hr']}\n"
        "      '*/hr/*': {principals: ['group:ops']}\n"
        "      'pay review.md': {principals: ['group:hr']}\n"
    )
    write_config(tmp_path / "kb", config)
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as base:
        report = base.ingest([folder])
        assert not report.failed, report.failed
        by_name = {Path(r.uri).name: r.access for r in base.list_documents()}
        hr, staff = Principal(groups=("hr",)), Principal(groups=("staff",))
        seen = {
            who: sorted(Path(r.uri).name for r in base.query(QUERY, principal=p, top_n=10))
            for who, p in (("hr", hr), ("staff", staff))
        }
    assert by_name["pay.md"] == ["group:hr"] and by_name["notes.md"] == ["group:staff"]
    assert by_name["pay review.md"] == ["group:hr"]
    assert seen["hr"] == sorted(n for n, a in by_name.items() if a != ["group:staff"])
    assert "pay.md" not in seen["staff"] and "notes.md" in seen["staff"]


def test_a_failed_new_version_never_changes_who_reads_it(
    tmp_path: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    """A new version's access takes effect with its commit: while it is written, and after
    its write failed, readers see the committed version with the committed access."""
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server).replace("llm_max_retries: 3", "llm_max_retries: 1"))
    alice = Principal(user="alice")

    def upload(base: KnowledgeBase, text: str, access: Any) -> Any:
        items = base.run_sync(
            base.aread_upload("pay.md", text.encode(), metadata={"access": access})
        )
        return base.run_sync(base.aingest_documents(items))

    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as base:
        first = upload(base, "# Pay\n\nThe orchard memo on the hr pay bands.\n", ["group:hr"])
        assert first.added == 1, first.failed
        llm_server.fail_next = [500] * 100
        failed = upload(base, "# Pay\n\nThe orchard memo, now for everyone.\n", "public")
        assert len(failed.failed) == 1
        llm_server.reset()  # reads may ask the LLM too (query rewriting)
        (record,) = base.list_documents()
        assert record.status == "failed" and record.access == ["group:hr"]
        with pytest.raises(DocumentNotFoundError):
            base.get_document(record.id, principal=alice)
        assert base.list_documents(principal=alice) == []
        assert base.stats(principal=alice).documents == 0
        assert base.query(QUERY, principal=alice) == []
        assert "hr pay bands" in str(
            base.get_document(record.id, principal=Principal(groups=("hr",)))
        )
        again = upload(base, "# Pay\n\nThe orchard memo, now for everyone.\n", "public")
        assert again.changed == 1, again.failed
        opened = base.get_document(record.id, principal=alice)
        assert "now for everyone" in str(opened) and "hr pay bands" not in str(opened)
        assert [r.document_id for r in base.query(QUERY, principal=alice)] == [record.id]


def test_a_documents_content_never_widens_its_access(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """A file's lines or front matter never say who reads it; a record's ``access`` field
    may narrow its source's access, never widen it."""
    folder = tmp_path / "in"
    folder.mkdir()
    line = {"_id": "line-1", "text": "The orchard memo on open doors.", "access": "public"}
    (folder / "lines.jsonl").write_text(json.dumps(line) + "\n")
    config = (
        "sources:\n  default:\n    access: {principals: ['group:staff']}\n"
        "  facts:\n    type: records\n    id_field: fact_id\n"
        "    access: {principals: ['group:staff']}\n"
    )
    write_config(tmp_path / "kb", config)
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as base:
        assert not base.ingest([folder / "lines.jsonl"]).failed
        (stored,) = base.list_documents()
        assert stored.access == ["group:staff"] and "access" not in stored.metadata
        records = [
            {"fact_id": "wide", "text": "Orchard memo for all.", "access": "public"},
            {"fact_id": "other", "text": "Orchard memo for ops.", "access": ["group:ops"]},
            {"fact_id": "same", "text": "Orchard memo for staff.", "access": ["group:staff"]},
            {"fact_id": "admins", "text": "Orchard memo, admins.", "access": {"public": False}},
        ]
        report = base.add_records(records, source="facts")
        access = {r.id: r.access for r in base.list_documents(source="facts")}
    assert access == {"same": ["group:staff"], "admins": ["nobody"]}
    errors = sorted(f.error for f in report.failed)
    assert len(errors) == 2 and all("is wider than its source allows" in e for e in errors)
    assert "only an admin can widen" in errors[0]


def test_a_knowledge_base_without_access_answers_as_before(
    tmp_path: Path, embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store made before access control (no index on ``access``, no field on any point)
    answers every principal exactly as it answers the admin."""
    import flexmatch.engine.stores.edge as edge

    old_fields = tuple(f for f in edge.INDEXED_FIELDS if f != "access")
    monkeypatch.setattr(edge, "INDEXED_FIELDS", old_fields)  # the store as it was created
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as base:
        base.add_records([memo(i, None) for i in range(5)])
        points = base.store.scroll("default", {"record": "match"})
        assert points and all("access" not in h.payload for h in points)
        admin = base.query(QUERY, top_n=10)
        for who in (Principal(), Principal(user="alice", groups=("hr",))):
            answer = base.query(QUERY, top_n=10, principal=who)
            assert [(r.chunk_id, r.score) for r in answer] == [(r.chunk_id, r.score) for r in admin]
            assert len(base.list_documents(principal=who)) == 5


# -- the CLI --------------------------------------------------------------------------
def test_cli_query_as_docs_show_and_docs_access(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, "sources:\n  default: {}\n")
    with KnowledgeBase.open(kb_dir, embedder=embedder) as base:
        base.add_records([memo(0, Access(principals=["group:hr"])), memo(1, None)])
    shown = run("docs", "show", "memo-0", "--kb", str(kb_dir))
    assert shown.returncode == 0 and "readable by: group:hr" in shown.stdout
    as_bob = run("query", QUERY, "--kb", str(kb_dir), "--as", "user:bob", "--json")
    assert as_bob.returncode == 0 and "memo-0" not in as_bob.stdout and "memo-1" in as_bob.stdout
    changed = run("docs", "access", "memo-0", "--principal", "user:bob", "--kb", str(kb_dir))
    assert changed.returncode == 0 and "readable by user:bob" in changed.stdout
    as_bob = run("query", QUERY, "--kb", str(kb_dir), "--as", "user:bob", "--json")
    assert "memo-0" in as_bob.stdout
    listed = run("docs", "list", "--kb", str(kb_dir), "--as", "bob", "--json")
    assert (
        listed.returncode == 2
        and "'user:NAME'" in listed.stderr
        and "Traceback" not in listed.stderr
    )


def test_cli_keys_bound_to_a_person_or_a_service(tmp_path: Path) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, "sources:\n  default: {}\n")
    made = run("keys", "create", "--kb", str(kb_dir), "--principal", "user:alice", "--group", "hr")
    assert made.returncode == 0, made.stderr
    assert run("keys", "create", "--kb", str(kb_dir), "--service").returncode == 0
    assert run("keys", "create", "--kb", str(kb_dir)).returncode == 0
    listed = run("keys", "list", "--kb", str(kb_dir))
    assert "user:alice, group:hr" in listed.stdout
    assert "the user each request names" in listed.stdout and "the whole tenant's" in listed.stdout
    alice = KeyStore.for_kb(kb_dir).verify(made.stdout.strip())
    assert alice is not None and alice.reader(None) == Principal(user="alice", groups=("hr",))
    bad = run("keys", "create", "--kb", str(kb_dir), "--principal", "alice")
    assert bad.returncode != 0 and "'user:NAME'" in bad.stderr and "Traceback" not in bad.stderr
    both = run("keys", "create", "--kb", str(kb_dir), "--service", "--group", "hr")
    assert both.returncode != 0 and "a service key names its users per request" in both.stderr


# -- HTTP, through a real flexmatch serve ----------------------------------------------
def _memos() -> dict[str, Access | None]:
    chosen = random.Random(24)
    options: list[Access | None] = [
        None,
        Access(public=True),
        Access(public=False),
        Access(principals=["group:hr"]),
        Access(principals=["user:alice"]),
        Access(principals=["group:eng", "user:carol"]),
    ]
    return {f"memo-{i}": chosen.choice(options) for i in range(12)}


MEMOS = _memos()


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[tuple[Served, dict[str, str]]]:
    kb_dir = tmp_path_factory.mktemp("served") / "kb"
    write_config(kb_dir, KB_CONFIG)
    with KnowledgeBase.open(kb_dir, embedder=embedder) as base:
        records = [memo(int(d.split("-")[1]), a) for d, a in MEMOS.items()]
        base.add_records(records, source="default", tenant=TENANT)
        upload = base.run_sync(
            base.aread_upload(
                "pay.txt", b"Orchard memo: the pay scale file.", metadata={"access": ["group:hr"]}
            )
        )
        base.run_sync(base.aingest_documents(upload, tenant=TENANT))
    store = KeyStore.for_kb(kb_dir)
    keys = {
        "admin": store.create(TENANT, "admin")[1],
        "service": store.create(TENANT, "read", identity=key_identity(service=True))[1],
        "alice": store.create(TENANT, "read,write", identity=key_identity("user:alice", ["hr"]))[1],
        "unbound": store.create(TENANT, "read")[1],
    }
    with served_kb(kb_dir, KB_CONFIG, "--rate", "0") as server:
        yield server, keys


def _as(token: str, who: Principal | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if who is not None:
        if who.user:
            headers["X-FlexMatch-Principal"] = f"user:{who.user}"
        if who.groups:
            headers["X-FlexMatch-Groups"] = ",".join(who.groups)
    return headers


def _upload_id(client: httpx.Client, admin: str) -> str:
    listed = client.get("/v1/documents", params={"limit": 500}, headers=_as(admin)).json()
    return next(d["id"] for d in listed["items"] if d["uri"].endswith("pay.txt"))


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(principals)
def test_property_http_service_key_reveals_nothing_unreadable(
    served: tuple[Served, dict[str, str]], who: Principal
) -> None:
    server, keys = served
    allowed = {d for d, a in MEMOS.items() if may_read(a, who)}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        headers = _as(keys["service"], who)
        upload = _upload_id(client, keys["admin"])
        pay = may_read(Access(principals=["group:hr"]), who)
        expected = allowed | ({upload} if pay else set())
        found = client.post("/v1/search", json={"query": QUERY, "top_n": 50}, headers=headers)
        assert found.status_code == 200, found.text
        assert {r["document_id"] for r in found.json()["results"]} == expected
        similar = client.post(
            "/v1/search/similar", json={"text": QUERY, "top_n": 50}, headers=headers
        )
        assert {r["document_id"] for r in similar.json()["results"]} == expected
        listed = client.get("/v1/documents", params={"limit": 500}, headers=headers).json()
        assert {d["id"] for d in listed["items"]} == expected and listed["total"] == len(expected)
        assert client.get("/v1/stats", headers=headers).json()["documents"] == len(expected)
        for document_id in MEMOS:
            status = client.get(f"/v1/documents/{document_id}", headers=headers).status_code
            assert status == (200 if document_id in allowed else 404)
        original = client.get(f"/v1/documents/{upload}/original", headers=headers)
        assert original.status_code == (200 if pay else 404)
        if not pay:
            assert "pay" not in original.text.lower().replace("original of document", "")


def test_http_service_key_searches_for_two_users_apart(
    served: tuple[Served, dict[str, str]],
) -> None:
    """The same query, the same service key, two users: two different, correct result
    sets (the cache keeps them apart, and a body principal works like the header)."""
    server, keys = served
    alice, carol = Principal(user="alice", groups=("hr",)), Principal(user="carol")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        answers = {}
        for _ in range(2):  # the second time from the cache
            for name, who in (("alice", alice), ("carol", carol)):
                body = {"query": QUERY, "top_n": 50, "principal": who.model_dump(mode="json")}
                response = client.post("/v1/search", json=body, headers=_as(keys["service"]))
                answers[name] = {r["document_id"] for r in response.json()["results"]}
        upload = _upload_id(client, keys["admin"])
    assert answers["alice"] == {d for d, a in MEMOS.items() if may_read(a, alice)} | {upload}
    assert answers["carol"] == {d for d, a in MEMOS.items() if may_read(a, carol)}
    assert answers["alice"] != answers["carol"]


def test_http_keys_person_unbound_and_admin(served: tuple[Served, dict[str, str]]) -> None:
    server, keys = served
    nobody = {d for d, a in MEMOS.items() if may_read(a, Principal())}
    alice = Principal(user="alice", groups=("hr",))
    with httpx.Client(base_url=server.url, timeout=60) as client:

        def found(token: str, who: Principal | None = None) -> set[str]:
            response = client.post(
                "/v1/search", json={"query": QUERY, "top_n": 50}, headers=_as(token, who)
            )
            assert response.status_code == 200, response.text
            return {r["document_id"] for r in response.json()["results"]}

        upload = _upload_id(client, keys["admin"])
        assert found(keys["unbound"]) == nobody  # a key without an identity: never wider
        assert found(keys["service"]) == nobody  # a service key naming nobody
        assert found(keys["alice"]) == {d for d, a in MEMOS.items() if may_read(a, alice)} | {
            upload
        }
        assert found(keys["admin"]) == set(MEMOS) | {upload}
        assert found(keys["admin"], Principal(user="bob")) == {
            d for d, a in MEMOS.items() if may_read(a, Principal(user="bob"))
        }  # an admin checks what a colleague would see
        refused = client.post(
            "/v1/search", json={"query": QUERY}, headers=_as(keys["alice"], Principal(user="bob"))
        )
        assert refused.status_code == 403 and "only a service or admin key" in refused.text
        bad = client.post(
            "/v1/search",
            json={"query": QUERY},
            headers={**_as(keys["service"]), "X-FlexMatch-Principal": "bob"},
        )
        assert bad.status_code == 422 and "user:NAME" in bad.text
        # a writer cannot widen access through metadata; only an admin changes it
        widen = client.put(
            f"/v1/documents/{upload}",
            data={"metadata": '{"access": "public"}'},
            headers=_as(keys["alice"]),
        )
        assert widen.status_code == 403
        restricted = next(
            d
            for d, a in MEMOS.items()
            if a is not None and not a.public and not may_read(a, Principal())
        )
        assert (
            client.put(
                f"/v1/documents/{restricted}/access",
                json={"access": {"public": True}},
                headers=_as(keys["alice"]),
            ).status_code
            == 403
        )
        changed = client.put(
            f"/v1/documents/{restricted}/access",
            json={"access": {"public": True}},
            headers=_as(keys["admin"]),
        )
        assert changed.status_code == 200 and changed.json()["document"]["access"] == ["public"]
        assert restricted in found(keys["unbound"])  # the cache was dropped with the change
        back = client.put(
            f"/v1/documents/{restricted}/access",
            json={"access": MEMOS[restricted].model_dump()},  # type: ignore[union-attr]
            headers=_as(keys["admin"]),
        )
        assert back.status_code == 200 and restricted not in found(keys["unbound"])


# -- MCP over HTTP --------------------------------------------------------------------
def test_mcp_service_key_acts_for_two_users_apart(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    """The same tools, one service key, two users named by the host application's headers:
    two different, correct answers; a person's key cannot name another; an unbound key
    reads what the whole tenant may; the model cannot name anyone (no tool argument)."""
    import asyncio
    import json

    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from flexmatch.adapters.mcp import build_server
    from tests.adapters.http.servers import UvicornThread, free_port

    write_config(tmp_path / "kb", "sources:\n  default: {}\n")
    kb = KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={})
    kb.add_records([memo(int(d.split("-")[1]), a) for d, a in MEMOS.items()], tenant=TENANT)
    keys = KeyStore.for_kb(kb.path)
    service = keys.create(TENANT, "read", identity=key_identity(service=True))[1]
    bob = keys.create(TENANT, "read", identity=key_identity("user:bob"))[1]
    unbound = keys.create(TENANT, "read")[1]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = build_server(kb, keys=keys, url=url).streamable_http_app()

    async def call(
        token: str, tool: str, arguments: dict[str, Any], who: Principal | None = None
    ) -> tuple[bool, str]:
        client = create_mcp_http_client(headers=_as(token, who))
        transport = streamable_http_client(f"{url}/mcp", http_client=client)
        async with Client(transport, read_timeout_seconds=60) as session:
            result = await session.call_tool(tool, arguments)
            return bool(result.is_error), str(result.content[0].text)  # type: ignore[union-attr]

    def found(token: str, who: Principal | None = None) -> set[str]:
        error, text = asyncio.run(
            call(token, "search_knowledge", {"query": QUERY, "top_n": 20}, who)
        )
        assert not error, text
        return {r["document_id"] for r in json.loads(text)["results"]}

    alice, carol = Principal(user="alice", groups=("hr",)), Principal(user="carol")
    try:
        with UvicornThread(app, port=port):
            for_alice = found(service, alice)
            for_carol = found(service, carol)
            assert for_alice == {d for d, a in MEMOS.items() if may_read(a, alice)}
            assert for_carol == {d for d, a in MEMOS.items() if may_read(a, carol)}
            assert for_alice != for_carol
            nobody = {d for d, a in MEMOS.items() if may_read(a, Principal())}
            assert found(unbound) == nobody and found(service) == nobody
            error, text = asyncio.run(call(bob, "search_knowledge", {"query": QUERY}, alice))
            assert error and "only a service or admin key may name" in text
            error, listed = asyncio.run(call(service, "list_documents", {}, carol))
            assert {d["id"] for d in json.loads(listed)["documents"]} == for_carol
            hidden = next(d for d in MEMOS if d not in for_carol)
            error, text = asyncio.run(call(service, "get_document", {"document_id": hidden}, carol))
            assert error and f"no document '{hidden}'" in text
            # the model (or a passage it read) cannot choose whose documents it reads
            for arguments in ({"as_user": "user:alice"}, {"groups": ["hr"]}):
                error, text = asyncio.run(
                    call(service, "search_knowledge", {"query": QUERY, **arguments}, carol)
                )
                assert error and "does not take the argument" in text, text
                assert "(it takes: query, top_n, source, filters, depth, expand)" in text
            client = create_mcp_http_client(
                headers={**_as(service), "X-FlexMatch-Principal": "carol"}
            )

            async def malformed() -> str:
                transport = streamable_http_client(f"{url}/mcp", http_client=client)
                async with Client(transport, read_timeout_seconds=60) as session:
                    result = await session.call_tool("search_knowledge", {"query": QUERY})
                    assert result.is_error
                    return str(result.content[0].text)  # type: ignore[union-attr]

            assert "X-FlexMatch-Principal 'carol' must be 'user:NAME'" in asyncio.run(malformed())
    finally:
        kb.close()


def test_console_pages_show_only_what_the_key_reads(served: tuple[Served, dict[str, str]]) -> None:
    """The console's documents and search pages answer as the signed-in key; its document
    page says who can read a document, and one the key may not read is not found."""
    import re

    server, keys = served
    alice = Principal(user="alice", groups=("hr",))
    hidden = next(d for d, a in MEMOS.items() if not may_read(a, alice))
    shown = next(
        d for d, a in MEMOS.items() if a is not None and a.principals and may_read(a, alice)
    )
    with httpx.Client(base_url=server.url, timeout=60) as client:
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/console/signin").text)
        assert csrf
        signed = client.post(
            "/console/signin",
            data={"csrf": csrf.group(1), "api_key": keys["alice"], "next": "/console/"},
            headers={"Origin": server.url, "Sec-Fetch-Site": "same-origin"},
        )
        assert signed.status_code in (200, 303), signed.text[:300]
        page = client.get(f"/console/documents/{shown}")
        assert page.status_code == 200
        readers = ", ".join(MEMOS[shown].principals)  # type: ignore[union-attr]
        assert f'<dt>Readable by</dt><dd class="access">{readers}</dd>' in page.text
        assert client.get(f"/console/documents/{hidden}").status_code == 404

        def linked(html: str, document_id: str) -> bool:
            return re.search(rf"id={re.escape(document_id)}[&\"]", html) is not None

        listing = client.get("/console/documents").text
        assert linked(listing, shown) and not linked(listing, hidden)
        search = client.get("/console/search", params={"q": QUERY, "top_n": "50"}).text
        assert linked(search, shown) and not linked(search, hidden)


def test_console_search_as_a_colleague(served: tuple[Served, dict[str, str]]) -> None:
    """An admin's search playground searches as a named user (what they would see); a
    person's key cannot."""
    import re

    server, keys = served

    def signed_in(token: str) -> httpx.Client:
        client = httpx.Client(base_url=server.url, timeout=60)  # closed by its caller
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/console/signin").text)
        assert csrf
        client.post(
            "/console/signin",
            data={"csrf": csrf.group(1), "api_key": token, "next": "/console/"},
            headers={"Origin": server.url, "Sec-Fetch-Site": "same-origin"},
        )
        return client

    def linked(html: str) -> set[str]:
        return {d for d in MEMOS if re.search(rf"id={re.escape(d)}[&\"]", html)}

    carol = Principal(user="carol")
    params = {"q": QUERY, "top_n": "50"}
    admin = signed_in(keys["admin"])
    everything = admin.get("/console/search", params=params)
    assert 'name="as_user"' in everything.text and linked(everything.text) == set(MEMOS)
    as_carol = admin.get("/console/search", params={**params, "as_user": "user:carol"})
    assert linked(as_carol.text) == {d for d, a in MEMOS.items() if may_read(a, carol)}
    alice = signed_in(keys["alice"])
    page = alice.get("/console/search", params=params)
    assert 'name="as_user"' not in page.text
    refused = alice.get("/console/search", params={**params, "as_user": "user:carol"})
    assert refused.status_code == 403 and "only a service or admin key" in refused.text
    admin.close()
    alice.close()


# -- jobs and overwrites over HTTP (a tenant of their own) ------------------------------
OTHER = "globex"


def _job(
    client: httpx.Client, response: httpx.Response, token: str, who: Principal | None = None
) -> dict[str, Any]:
    """The finished job ``response`` accepted, polled as the key (and user) that started it."""
    assert response.status_code == 202, response.text
    url = response.json()["url"]
    for _ in range(600):
        polled = client.get(url, headers=_as(token, who))
        assert polled.status_code == 200, polled.text
        job = polled.json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"{url} did not finish")


def _records(
    client: httpx.Client, token: str, records: list[dict[str, Any]], who: Principal | None = None
) -> httpx.Response:
    body = {"source": "facts", "records": records}
    return client.post("/v1/records", json=body, headers=_as(token, who))


def _upload(client: httpx.Client, token: str, name: str, text: str, **metadata: Any) -> Any:
    form = {"metadata": json.dumps(metadata)} if metadata else {}
    files = {"files": (name, text.encode(), "text/plain")}
    return client.post("/v1/documents", files=files, data=form, headers=_as(token))


@pytest.fixture(scope="module")
def other_keys(served: tuple[Served, dict[str, str]]) -> dict[str, str]:
    store = KeyStore.for_kb(served[0].kb_dir)
    made = {
        "admin": (["admin"], None),
        "ann": (["read", "write"], key_identity("user:ann", ["hr"])),
        "bob": (["read", "write"], key_identity("user:bob")),
        "service": (["read", "write"], key_identity(service=True)),
        "plain": (["read", "write"], None),
    }
    return {
        name: store.create(OTHER, ",".join(perms), identity=identity)[1]
        for name, (perms, identity) in made.items()
    }


def test_http_jobs_show_a_key_only_its_own_jobs(
    served: tuple[Served, dict[str, str]], other_keys: dict[str, str]
) -> None:
    """A job's outcomes name files and documents: another key, or the same service key
    acting for another user, gets the 404 of an unknown job; admins see every job."""
    server, keys = served[0], other_keys
    carol, dave = Principal(user="carol"), Principal(user="dave")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        hr = [{"fact_id": "jobs-hr", "subject": "Pay", "text": "Pay bands."}]
        ann_job = _job(client, _records(client, keys["ann"], hr), keys["ann"])
        assert ann_job["documents"][0]["document_id"] == "jobs-hr"
        upload = _job(client, _upload(client, keys["ann"], "bonus-plan.txt", "Bonus."), keys["ann"])
        note = [{"fact_id": "jobs-carol", "subject": "Note", "text": "Carol's note."}]
        started = _records(client, keys["service"], note, carol)
        carol_job = _job(client, started, keys["service"], carol)

        def listed(token: str, who: Principal | None = None) -> set[str]:
            response = client.get("/v1/jobs", headers=_as(token, who))
            assert response.status_code == 200, response.text
            return {job["id"] for job in response.json()}

        def shown(token: str, job_id: str, who: Principal | None = None) -> httpx.Response:
            return client.get(f"/v1/jobs/{job_id}", headers=_as(token, who))

        mine = {ann_job["id"], upload["id"]}
        assert listed(keys["ann"]) >= mine and carol_job["id"] not in listed(keys["ann"])
        for token, who in ((keys["bob"], None), (keys["plain"], None), (keys["service"], dave)):
            assert listed(token, who).isdisjoint(mine | {carol_job["id"]})
            for job_id in mine:
                refused = shown(token, job_id, who)
                assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
                assert "jobs-hr" not in refused.text and "bonus" not in refused.text
        assert carol_job["id"] in listed(keys["service"], carol)
        assert shown(keys["service"], carol_job["id"], carol).status_code == 200
        assert listed(keys["admin"]) >= mine | {carol_job["id"]}
        admin_view = shown(keys["admin"], ann_job["id"]).json()
        assert admin_view["documents"][0]["document_id"] == "jobs-hr"


def test_http_a_writer_cannot_overwrite_a_document_it_cannot_read(
    served: tuple[Served, dict[str, str]], other_keys: dict[str, str]
) -> None:
    """By records or upload under the same id: the document fails with the knowledge
    base's one refusal and the stored one is untouched; a reader of it, and an admin, may."""
    server, keys = served[0], other_keys
    with httpx.Client(base_url=server.url, timeout=60) as client:
        secret = {"fact_id": "over-hr", "subject": "Pay", "text": "Pay bands of the hr team."}
        hr_only = [{**secret, "access": ["group:hr"]}]  # only an admin key sets access
        made = _job(client, _records(client, keys["admin"], hr_only), keys["admin"])
        assert made["documents"][0]["outcome"] == "added", made
        upload = _job(
            client,
            _upload(client, keys["admin"], "salaries.txt", "Salaries.", access=["group:hr"]),
            keys["admin"],
        )
        upload_id = upload["documents"][0]["document_id"]

        def text(document_id: str) -> str:
            detail = client.get(f"/v1/documents/{document_id}", headers=_as(keys["admin"]))
            assert detail.status_code == 200, detail.text
            return json.dumps(detail.json())

        forged = {**secret, "text": "Overwritten by bob."}
        bob = Principal(user="bob")
        attempts = [
            (_records(client, keys["bob"], [forged]), keys["bob"], None, "over-hr"),
            (_records(client, keys["plain"], [forged]), keys["plain"], None, "over-hr"),
            (_records(client, keys["service"], [forged], bob), keys["service"], bob, "over-hr"),
            (
                _upload(client, keys["bob"], "salaries.txt", "Overwritten by bob."),
                keys["bob"],
                None,
                upload_id,
            ),
        ]
        for response, token, who, document_id in attempts:
            outcome = _job(client, response, token, who)["documents"][0]
            assert outcome["outcome"] == "failed", outcome
            refusal = f"document id '{document_id}' in tenant 'globex' cannot be written"
            assert refusal in outcome["error"]
            assert "group" not in outcome["error"]  # nothing about it is revealed
        assert "Overwritten" not in text("over-hr") and "Overwritten" not in text(upload_id)
        assert "group:hr" in text("over-hr")
        # one who may read it may overwrite it (keeping its access), and so may an admin
        changed = _job(client, _records(client, keys["ann"], [forged]), keys["ann"])
        assert changed["documents"][0]["outcome"] == "changed", changed
        assert "Overwritten" in text("over-hr") and "group:hr" in text("over-hr")
        by_admin = _upload(client, keys["admin"], "salaries.txt", "Rewritten by an admin.")
        assert _job(client, by_admin, keys["admin"])["documents"][0]["outcome"] == "changed"
        assert "Rewritten by an admin" in text(upload_id)


def test_http_records_without_an_id_differing_only_in_access_are_two_documents(
    served: tuple[Served, dict[str, str]], other_keys: dict[str, str]
) -> None:
    """The id of a record without one hashes its access too, so an open copy of a
    restricted record never merges into (and opens or closes) the other."""
    server, keys = served[0], other_keys
    with httpx.Client(base_url=server.url, timeout=60) as client:
        rota = {"subject": "Rota", "text": "The night rota of the ops team."}
        records = [rota, {**rota, "access": ["group:hr"]}, {**rota, "access": "public"}]
        job = _job(client, _records(client, keys["admin"], records), keys["admin"])
        outcomes = job["documents"]
        assert [o["outcome"] for o in outcomes] == ["added"] * 3, outcomes
        ids = [o["document_id"] for o in outcomes]
        assert len(set(ids)) == 3
        seen = client.get("/v1/documents", params={"limit": 500}, headers=_as(keys["plain"]))
        visible = {d["id"] for d in seen.json()["items"]}
        assert ids[0] in visible and ids[2] in visible and ids[1] not in visible
        # the same records again are the same documents (the id is stable)
        again = _job(client, _records(client, keys["admin"], records), keys["admin"])
        assert [o["document_id"] for o in again["documents"]] == ids
        assert {o["outcome"] for o in again["documents"]} == {"unchanged"}


def test_http_only_an_admin_key_sets_access(
    served: tuple[Served, dict[str, str]], other_keys: dict[str, str]
) -> None:
    """A writer's metadata or record field naming an access list is refused (403), so
    it can neither open a new document nor widen a stored one by sending its text again;
    an admin key may."""
    server, keys = served[0], other_keys
    ann = Principal(user="ann", groups=("hr",))
    with httpx.Client(base_url=server.url, timeout=60) as client:
        made = _upload(
            client, keys["admin"], "hr-grid.txt", "The hr pay grid.", access=["group:hr"]
        )
        document_id = _job(client, made, keys["admin"])["documents"][0]["document_id"]
        opened = {"fact_id": "open-1", "subject": "S", "text": "Open to all.", "access": "public"}
        refused = [
            _upload(client, keys["ann"], "hr-grid.txt", "The hr pay grid.", access="public"),
            _upload(client, keys["ann"], "fresh.txt", "A fresh note.", access="public"),
            _records(client, keys["ann"], [opened]),
            _records(client, keys["service"], [opened], ann),
        ]
        for response in refused:
            assert response.status_code == 403, response.text
            error = response.json()["error"]
            assert error["code"] == "write_refused"
            assert "only an admin may set a document's access" in error["message"]
        plain = client.get(f"/v1/documents/{document_id}", headers=_as(keys["plain"]))
        assert plain.status_code == 404
        again = _upload(client, keys["ann"], "hr-grid.txt", "The hr pay grid.")
        assert _job(client, again, keys["ann"])["documents"][0]["outcome"] == "unchanged"
        assert (
            client.get(f"/v1/documents/{document_id}", headers=_as(keys["plain"])).status_code
            == 404
        )
        by_admin = _records(client, keys["admin"], [opened])
        assert _job(client, by_admin, keys["admin"])["documents"][0]["outcome"] == "added"
        assert client.get("/v1/documents/open-1", headers=_as(keys["plain"])).status_code == 200
        # an admin key naming someone who may not read it writes as an admin: a PUT
        # replaces it as a DELETE removes it (neither answers "not found")
        bob = _as(keys["admin"], Principal(user="bob"))
        assert client.get(f"/v1/documents/{document_id}", headers=bob).status_code == 404
        replaced = client.put(
            f"/v1/documents/{document_id}", headers=bob, data={"metadata": '{"rev": "2"}'}
        )
        assert replaced.status_code == 200, replaced.text
        assert client.delete(f"/v1/documents/{document_id}", headers=bob).status_code == 200


def test_http_metrics_are_off_without_an_operator_token(
    served: tuple[Served, dict[str, str]],
) -> None:
    """/metrics adds up every tenant's traffic: with no ``service.metrics_token`` set it
    is off, and no tenant's key, not even an admin's, reads it."""
    server, keys = served
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for token in (keys["admin"], keys["unbound"]):
            response = client.get("/metrics", headers=_as(token))
            assert response.status_code == 404, response.text
            assert response.json()["error"]["code"] == "not_found"
            assert "/metrics is off: set service.metrics_token" in response.text
