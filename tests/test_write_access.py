"""Writes are refused by the knowledge base itself, on every path: a writer never replaces,
removes or re-indexes a document it may not read, and what it is told never depends on
that document (its source, its access list, its content, whether it changed). Removing,
re-indexing or reading a hidden id is answered exactly as a missing one is."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from flexmatch import (
    ADMIN,
    Access,
    Client,
    ConfigError,
    Document,
    DocumentNotFoundError,
    Element,
    KnowledgeBase,
    Principal,
    named_principal,
)
from flexmatch.access import GROUPS_HEADER, PRINCIPAL_HEADER
from flexmatch.adapters.agent import handle_tool_call
from flexmatch.service import ApiKey, KeyIdentity, grants
from flexmatch.testing import HashEmbedder
from tests.adapters.http.harness import KB_CONFIG
from tests.conftest import write_config

ALICE = Principal(user="alice")
HR = Principal(user="bob", groups=("hr",))


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    write_config(tmp_path / "kb", KB_CONFIG)
    with KnowledgeBase.open(tmp_path / "kb", embedder=HashEmbedder(), env={}) as opened:
        yield opened


def fact(fact_id: str, text: str, access: Access | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"fact_id": fact_id, "subject": f"Fact {fact_id}", "text": text}
    if access is not None:
        record["access"] = access.model_dump()
    return record


def page(document_id: str, text: str, source: str = "default") -> Document:
    element = Element(kind="paragraph", text=text)
    return Document(
        id=document_id, uri=f"{document_id}.txt", source=source, title="", elements=[element]
    )


def stored(kb: KnowledgeBase, tenant: str, document_id: str) -> tuple[Any, ...]:
    record = kb.registry.get(tenant, document_id)
    assert record is not None
    copy = kb.stored_copy(document_id, tenant=tenant)
    return record.version, record.content_hash, record.access, copy.text if copy else None


def said(error: str | None, document_id: str) -> str:
    """An answer with the id it names taken out: what must not differ between ids."""
    return (error or "").replace(document_id, "ID")


def refused(error: str | None, document_id: str) -> str:
    """A write's refusal without the writer's own label of its input (``record:0``, a
    file name) and the id: what must not differ between the documents it was refused for."""
    text = error or ""
    return said(
        text[text.find("document id '") :] if "document id '" in text else text, document_id
    )


# -- the engine's rule, through the Python API -----------------------------------------
def test_only_an_admin_sets_access_on_any_path_of_the_python_api(kb: KnowledgeBase) -> None:
    """A reader of a document may replace it, never open it up or narrow it: setting a
    document's access (a record's field, a document's metadata, ``update_metadata``) is
    an admin's act, refused by the engine whichever write carries it."""
    tenant = uuid.uuid4().hex[:12]
    hr_only = Access(principals=["group:hr"])
    assert not kb.add_records(
        [fact("hr-pay", "Pay bands.", hr_only)], source="facts", tenant=tenant
    ).failed
    before = stored(kb, tenant, "hr-pay")
    opened = {"access": {"public": True}}
    attempts = [
        kb.update_metadata("hr-pay", opened, tenant=tenant, principal=HR),
        kb.add_records(
            [fact("hr-pay", "Pay bands.", Access(public=True))],
            source="facts",
            tenant=tenant,
            principal=HR,
        ),
        kb.add_records(
            [fact("mine", "Mine.", Access(principals=["user:bob"]))],
            source="facts",
            tenant=tenant,
            principal=HR,
        ),
    ]
    for report in attempts:
        [failed] = report.failed
        assert "only an admin may set a document's access" in failed.error
    assert stored(kb, tenant, "hr-pay") == before
    assert kb.registry.get(tenant, "mine") is None
    assert [d.id for d in kb.list_documents(tenant=tenant, principal=ALICE)] == []
    # the stored access sent back unchanged is no change; an admin may change it
    same = kb.add_records(
        [fact("hr-pay", "Pay bands, revised.", hr_only)],
        source="facts",
        tenant=tenant,
        principal=HR,
    )
    assert not same.failed and stored(kb, tenant, "hr-pay")[2] == before[2]
    assert not kb.update_metadata("hr-pay", opened, tenant=tenant).failed
    assert [d.id for d in kb.list_documents(tenant=tenant, principal=ALICE)] == ["hr-pay"]


def test_a_writer_replaces_no_document_it_may_not_read(kb: KnowledgeBase) -> None:
    tenant = uuid.uuid4().hex[:12]
    hidden = {  # three documents alice may not read, as different as can be
        "hr-pay": fact("hr-pay", "Pay bands of the hr team.", Access(principals=["group:hr"])),
        "admins": fact("admins", "Root passwords rotate monthly.", Access(public=False)),
        "bobs": fact("bobs", "Bob's own notes.", Access(principals=["user:bob"])),
    }
    assert not kb.add_records(list(hidden.values()), source="facts", tenant=tenant).failed
    kb.ingest_documents([page("upload-1", "An uploaded page, hr only.")], tenant=tenant)
    kb.set_access("upload-1", Access(principals=["group:hr"]), tenant=tenant)
    before = {d: stored(kb, tenant, d) for d in [*hidden, "upload-1"]}
    answers = []
    for document_id in hidden:
        for text in ("Overwritten by alice.", hidden[document_id]["text"]):  # changed, or not
            report = kb.add_records(
                [fact(document_id, text)], source="facts", tenant=tenant, principal=ALICE
            )
            outcome = report.outcome("record")
            assert outcome.outcome == "failed" and not report.document_ids
            answers.append(refused(outcome.error, document_id))
    # the same id from another source (an upload, a page): the same refusal, the source unsaid
    for document in (page("hr-pay", "Overwritten."), page("upload-1", "Overwritten.")):
        report = kb.ingest_documents([document], tenant=tenant, principal=ALICE)
        answers.append(refused(report.outcome(document.uri).error, document.id))
    upload = kb.ingest_upload(
        "notes.txt", b"Overwritten.", document_id="upload-1", tenant=tenant, principal=ALICE
    )
    answers.append(refused(upload.outcome("notes.txt").error, "upload-1"))
    assert len(set(answers)) == 1, answers
    assert answers[0] == (
        f"document id 'ID' in tenant '{tenant}' cannot be written by this principal "
        "(choose another id, or ask an admin)"
    )
    assert {d: stored(kb, tenant, d) for d in before} == before  # nothing replaced
    # a reader of it may replace it, keeping its access; a new id is anyone's
    changed = kb.add_records(
        [fact("hr-pay", "Pay bands, revised.")], source="facts", tenant=tenant, principal=HR
    )
    assert changed.outcome("record").outcome == "changed"
    assert kb.registry.get(tenant, "hr-pay").access == ["group:hr"]  # type: ignore[union-attr]
    new = kb.add_records([fact("alices", "Mine.")], source="facts", tenant=tenant, principal=ALICE)
    assert new.outcome("record").outcome == "added"


def test_hidden_is_missing_for_remove_update_and_read(kb: KnowledgeBase) -> None:
    tenant = uuid.uuid4().hex[:12]
    kb.add_records(
        [fact("hr-pay", "Pay bands.", Access(principals=["group:hr"]))],
        source="facts",
        tenant=tenant,
    )
    before = stored(kb, tenant, "hr-pay")

    def refusal(call: Any, document_id: str) -> str:
        with pytest.raises(DocumentNotFoundError) as caught:
            call(document_id)
        return said(str(caught.value), document_id)

    calls = [
        lambda d: kb.remove_document(d, tenant=tenant, principal=ALICE),
        lambda d: kb.update_metadata(d, {"k": "v"}, tenant=tenant, principal=ALICE),
        lambda d: kb.get_document(d, tenant=tenant, principal=ALICE),
        lambda d: kb.get_original(d, tenant=tenant, principal=ALICE),
    ]
    for call in calls:
        assert refusal(call, "hr-pay") == refusal(call, "no-such-id")
    assert stored(kb, tenant, "hr-pay") == before
    kb.update_metadata("hr-pay", {"k": "v"}, tenant=tenant, principal=HR)  # a reader may
    kb.remove_document("hr-pay", tenant=tenant, principal=HR)
    assert kb.registry.get(tenant, "hr-pay") is None


def test_only_an_admin_prunes(kb: KnowledgeBase, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="only an admin"):
        kb.ingest(source="default", prune=True, principal=ALICE)


# -- the tools: one definition, served by the agent tool (and MCP, in the property test) --
def test_the_agent_tool_writes_as_its_principal_and_has_the_document_tools(
    kb: KnowledgeBase,
) -> None:
    tenant = uuid.uuid4().hex[:12]
    kb.add_records(
        [fact("hr-pay", "Pay bands.", Access(principals=["group:hr"])), fact("open", "Open.")],
        source="facts",
        tenant=tenant,
    )

    def call(name: str, arguments: dict[str, Any], who: Principal | None = ALICE) -> Any:
        raw = handle_tool_call(kb, name, arguments, tenant, principal=who)
        return json.loads(asyncio.run(raw))

    forged = {"record": fact("hr-pay", "Overwritten."), "source": "facts"}
    assert call("add_record", forged)["status"] == "failed"
    assert "Overwritten" not in (kb.stored_copy("hr-pay", tenant=tenant) or page("x", "")).text
    widened = {"record": fact("mine", "x", Access(public=True)), "source": "facts"}
    assert call("add_record", widened) == {
        "error": "only an admin may set a document's access (record.access)"
    }
    listed = call("list_documents", {})
    assert [d["id"] for d in listed["documents"]] == ["open"] and listed["total"] == 1
    assert call("get_document", {"document_id": "hr-pay"}) == {
        "error": said(call("get_document", {"document_id": "nothing"})["error"], "nothing").replace(
            "ID", "hr-pay"
        )
    }
    assert call("get_document", {"document_id": "hr-pay"}, HR)["document"]["id"] == "hr-pay"


# -- one parser of the principal headers, one admin rule ---------------------------------
def test_the_principal_headers_are_parsed_and_sent_by_one_rule() -> None:
    headers = {PRINCIPAL_HEADER: "user:alice", GROUPS_HEADER: "hr, eng"}
    assert named_principal(headers.get) == Principal(user="alice", groups=("eng", "hr"))
    assert named_principal({}.get) is None
    sent_empty = {PRINCIPAL_HEADER: "", GROUPS_HEADER: ""}  # the empty principal, named
    assert named_principal(sent_empty.get) == Principal()
    with pytest.raises(ConfigError, match=PRINCIPAL_HEADER):
        named_principal({PRINCIPAL_HEADER: "alice"}.get)
    seen: list[httpx.Headers] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return httpx.Response(200, json={"query": "q", "results": []})

    who = Principal(user="alice", groups=("hr",))
    with Client(
        "http://kb.test", "fm_x", principal=who, transport=httpx.MockTransport(answer)
    ) as client:
        client.query("q")
        client.query("q", principal=Principal(user="carol"))
        client.query("q", principal=Principal())  # the whole tenant's, even for an admin key
    assert named_principal(seen[0].get) == who  # what the server reads is what was sent
    assert named_principal(seen[1].get) == Principal(user="carol")
    assert named_principal(seen[2].get) == Principal()


def test_admin_may_do_everything_said_once() -> None:
    assert grants(["admin"], "write") and grants(["read", "write"], "write")
    assert not grants(["read"], "write", "admin")

    def key(permissions: list[str], identity: KeyIdentity | None = None) -> ApiKey:
        return ApiKey(id="k", tenant="t", permissions=permissions, created_at="", identity=identity)  # type: ignore[arg-type]

    assert key(["admin"]).writer(ALICE) is None  # an admin key writes as an admin
    assert key(["write"], KeyIdentity(service=True)).writer(ALICE) == ALICE
    assert key(["write"], KeyIdentity(service=True)).writer(None) == Principal()
    assert key(["write"], KeyIdentity(user="bob")).writer(None) == Principal(user="bob")


# -- the framework adapters refuse to read for nobody over restricted documents ------------
def test_frameworks_need_a_principal_over_restricted_documents(kb: KnowledgeBase) -> None:
    pytest.importorskip("langchain_core")
    from flexmatch.adapters.frameworks.langchain import FlexMatchRetriever

    tenant = uuid.uuid4().hex[:12]
    kb.add_records([fact("open", "Orchard memo, open.")], source="facts", tenant=tenant)
    assert not kb.has_restricted_documents(tenant=tenant)
    assert FlexMatchRetriever(kb=kb, tenant=tenant).invoke("orchard memo")  # nothing to hide
    kb.add_records(
        [fact("hr-pay", "Orchard memo, hr.", Access(principals=["group:hr"]))],
        source="facts",
        tenant=tenant,
    )
    assert kb.has_restricted_documents(tenant=tenant)
    with pytest.raises(ConfigError, match="pass principal="):
        FlexMatchRetriever(kb=kb, tenant=tenant)
    for who, readable in ((ALICE, {"open"}), (HR, {"open", "hr-pay"}), (ADMIN, {"open", "hr-pay"})):
        found = FlexMatchRetriever(kb=kb, tenant=tenant, principal=who, top_n=10).invoke("orchard")
        assert {d.metadata["document_id"] for d in found} == readable


def test_the_agent_tool_needs_a_principal_over_restricted_documents(kb: KnowledgeBase) -> None:
    """The agent tool keeps the frameworks' rule (``flexmatch.scoped``): with no principal
    over restricted documents the application is told, before any tool runs; ``ADMIN``
    is the explicit choice to read everything."""
    tenant = uuid.uuid4().hex[:12]
    kb.add_records([fact("open", "Orchard memo, open.")], source="facts", tenant=tenant)

    def call(tool: str, arguments: dict[str, Any], **who: Any) -> Any:
        return json.loads(asyncio.run(handle_tool_call(kb, tool, arguments, tenant, **who)))

    assert call("list_documents", {})["total"] == 1  # nothing to hide: no principal needed
    hidden = fact("hr-pay", "Orchard memo, hr.", Access(principals=["group:hr"]))
    kb.add_records([hidden], source="facts", tenant=tenant)
    for tool, arguments in (
        ("list_documents", {}),
        ("get_document", {"document_id": "hr-pay"}),
        ("search_knowledge", {"query": "orchard memo"}),
        ("add_record", {"record": fact("hr-pay", "Overwritten."), "source": "facts"}),
    ):
        with pytest.raises(ConfigError, match="pass principal="):
            call(tool, arguments)
    assert "Overwritten" not in (kb.stored_copy("hr-pay", tenant=tenant) or page("x", "")).text
    assert call("list_documents", {}, principal=ALICE)["total"] == 1
    assert call("list_documents", {}, principal=ADMIN)["total"] == 2


def test_a_writer_cannot_steer_a_document_to_another_access_rule(tmp_path: Path) -> None:
    """Access rules match a document's path, which its metadata says: a reader who
    rewrites that path (``hr/`` to ``pub/``) replaces the document, never its access."""
    rules = (
        "    access_rules:\n"
        "      'hr/*': {principals: ['group:hr']}\n"
        "      'pub/*': {public: true}\n"
    )
    write_config(tmp_path / "kb", KB_CONFIG.replace("  default: {}\n", "  default:\n" + rules))
    with KnowledgeBase.open(tmp_path / "kb", embedder=HashEmbedder(), env={}) as kb:
        hr_doc = page("hrdoc", "Pay bands of the hr team.").model_copy(
            update={"metadata": {"path": "hr/h.md"}}
        )
        kb.ingest_documents([hr_doc])
        assert kb.registry.get("default", "hrdoc").access == ["group:hr"]
        moved = kb.update_metadata("hrdoc", {"path": "pub/h.md"}, principal=HR)
        assert not moved.failed
        assert kb.registry.get("default", "hrdoc").access == ["group:hr"]
        assert kb.list_documents(principal=ALICE) == []
        # an admin may move it, and its access follows the rule
        kb.update_metadata("hrdoc", {"path": "pub/h.md"})
        assert kb.registry.get("default", "hrdoc").access == ["public"]
