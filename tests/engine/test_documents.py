"""Document records: versions readers can trust, repair, removal, listing, tenants, locks.

These check what happens to records and points, not how good the vectors are: they run on
``flexmatch.testing``'s ``HashEmbedder`` (no model) and, where nothing needs the store on
disk, on its in-memory store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.documents import DocumentRegistry
from flexmatch.engine.points import match_point_id
from flexmatch.engine.stores.base import Hit, StoredPoint
from flexmatch.errors import DocumentNotFoundError, StoreError, WriteConflictError
from flexmatch.testing import FakeLLMServer, HashEmbedder, memory_knowledge_base
from tests.conftest import llm_config, write_config
from tests.engine.samples import HARBOUR, ORCHARD, match_points, write


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


def test_readers_see_old_or_new_never_a_mix(tmp_path: Path, embedder: HashEmbedder) -> None:
    doc = write(tmp_path / "docs", "harbour.md", HARBOUR)
    with memory_knowledge_base(tmp_path / "kb", embedder=embedder) as kb:
        kb.ingest([doc])
        registry = DocumentRegistry(kb.store)
        (record,) = registry.list("default")
        old = {r.content for r in kb.query("harbour opening hours fees", top_n=10)}
        # a new version half-written: its points are stored, the record not yet committed
        pending = registry.begin("default", record, "v-new")
        point = match_points(kb)[0]
        vector = embedder.embed(["The harbour now opens at noon."])[0]
        kb.store.upsert(
            "default",
            [
                StoredPoint(
                    id=match_point_id("default", point["chunk_id"], "v-new", 0),
                    vector=vector,
                    text="x",
                    payload={
                        **point,
                        "version": "v-new",
                        "content": "The harbour now opens at noon.",
                    },
                )
            ],
        )
        during = {r.content for r in kb.query("harbour opening hours fees", top_n=10)}
        assert during == old  # only the committed version is visible
        registry.commit("default", pending, 1, 1, pending.access)
        after = {r.content for r in kb.query("harbour opening hours fees", top_n=10)}
        assert {p["version"] for p in match_points(kb)} == {"v-new"}  # old points cleaned up
    assert after == {"The harbour now opens at noon."}


def test_interrupted_write_is_repaired_on_the_next_run(
    tmp_path: Path, embedder: HashEmbedder
) -> None:
    doc = write(tmp_path / "docs", "harbour.md", HARBOUR)
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        kb.ingest([doc])
        registry = DocumentRegistry(kb.store)
        (record,) = registry.list("default")
        committed = len(match_points(kb))
        registry.begin("default", record, "v-crashed")  # then the process died
        point = match_points(kb)[0]
        kb.store.upsert(
            "default",
            [
                StoredPoint(
                    id="00000000-0000-0000-0000-00000000dead",
                    vector=[0.1] * embedder.dimension,
                    text="x",
                    payload={**point, "version": "v-crashed"},
                )
            ],
        )
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([doc])
        (after,) = kb.list_documents()
        assert report.repaired == 1 and report.unchanged == 1  # unchanged content, repaired state
        assert len(match_points(kb)) == committed
        assert after.status == "complete" and after.pending_version is None


def test_tenants_are_isolated(tmp_path: Path, embedder: HashEmbedder) -> None:
    harbour = write(tmp_path / "d", "harbour.md", HARBOUR)
    orchard = write(tmp_path / "d", "orchard.md", ORCHARD)
    with memory_knowledge_base(tmp_path / "kb", embedder=embedder) as kb:
        kb.ingest([harbour], tenant="alice")
        kb.ingest([orchard], tenant="bob")
        kb.ingest([harbour], tenant="bob")  # same file, other tenant: its own copy
        assert {r.uri.rsplit("/", 1)[-1] for r in kb.list_documents(tenant="alice")} == {
            "harbour.md"
        }
        assert all(r.uri.endswith("harbour.md") for r in kb.query("apples", tenant="alice"))
        (bob_orchard,) = [
            r for r in kb.list_documents(tenant="bob") if r.uri.endswith("orchard.md")
        ]
        with pytest.raises(DocumentNotFoundError, match="in tenant 'alice'"):
            kb.remove_document(bob_orchard.id, tenant="alice")
        with pytest.raises(DocumentNotFoundError):
            kb.get_document(bob_orchard.id, tenant="alice")
        assert kb.stats(tenant="bob").documents == 2 and kb.stats(tenant="alice").documents == 1
        kb.remove_document(bob_orchard.id, tenant="bob")
        assert kb.stats(tenant="bob").documents == 1
        assert kb.query("apples picked", tenant="bob")[0].uri.endswith("harbour.md")
        assert kb.stats(tenant="nobody").documents == 0 and kb.query("x", tenant="nobody") == []


def test_remove_deletes_every_point(tmp_path: Path, embedder: HashEmbedder) -> None:
    harbour = write(tmp_path / "d", "harbour.md", HARBOUR)
    with memory_knowledge_base(tmp_path / "kb", embedder=embedder) as kb:
        kb.ingest([harbour])
        (record,) = kb.list_documents()
        kb.remove_document(record.id)
        assert kb.store.count("default") == 0 and kb.list_documents() == []
        assert kb.ingest([harbour]).added == 1  # and it can come back


def test_a_second_writer_waits_then_fails_clearly(tmp_path: Path, embedder: HashEmbedder) -> None:
    harbour = write(tmp_path / "d", "harbour.md", HARBOUR)
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, "store:\n  lock_timeout: 0.5\n")
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as first:
        first.ingest([harbour])
        with (
            KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as second,
            pytest.raises(StoreError, match=r"in use by another FlexMatch process \(waited 0s\)"),
        ):
            second.ingest([harbour])
        assert first.query("harbour")  # the first one is unharmed
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as again:
        assert again.ingest([harbour]).unchanged == 1


def test_check_store_opens_the_store_or_says_why_not(
    tmp_path: Path, embedder: HashEmbedder
) -> None:
    """A server's readiness check: nothing ingested yet passes (and creates nothing); a
    store another process holds is a StoreError naming that; once it is free, it opens."""
    harbour = write(tmp_path / "d", "harbour.md", HARBOUR)
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, "store:\n  lock_timeout: 0.5\n")
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as first:
        first.check_store()
        assert not (kb_dir / ".flexmatch" / "qdrant").exists()
        first.ingest([harbour])
        second = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
        with pytest.raises(StoreError, match="in use by another FlexMatch process"):
            second.check_store()
    second.check_store()
    assert second.list_documents()  # the check opened it for reading
    second.close()


def test_document_listing_and_detail(tmp_path: Path, embedder: HashEmbedder) -> None:
    harbour = write(tmp_path / "d", "harbour.md", HARBOUR)
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        kb.ingest([harbour])
        (record,) = kb.list_documents(source="default")
        detail = kb.get_document(record.id)
        assert kb.list_documents(source="other") == []
        copy = kb.stored_copy(record.id)
        assert copy is not None and copy.title == "Harbour" and "Fees" in copy.text
        assert kb.stored_copy(record.id, tenant="other") is None
        stats = kb.stats()
    assert record.title == "Harbour" and record.status == "complete" and record.chunks == 2
    assert [c.heading_path for c in detail.chunks] == [["Harbour"], ["Harbour", "Fees"]]
    assert detail.chunks[1].qualifying_text.startswith("From Harbour › Fees.")
    kinds = [m.kind for m in detail.chunks[1].matching_texts]
    assert kinds[-1] == "content" and "sentence" in kinds
    assert stats.sources["default"].chunks == 2 and stats.store_bytes and stats.store_bytes > 0
    shutil.rmtree(tmp_path / "kb")


def test_concurrent_runs_in_one_tenant_do_not_repair_each_other(
    tmp_path: Path, embedder: HashEmbedder, llm_server: FakeLLMServer
) -> None:
    llm_server.latency = 0.1
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server))
    harbour = write(tmp_path / "d", "harbour.md", HARBOUR)
    orchard = write(tmp_path / "d", "orchard.md", ORCHARD)

    async def both(kb: KnowledgeBase) -> list:
        import asyncio

        first = asyncio.create_task(kb.aingest([harbour]))
        await asyncio.sleep(0.05)  # the first run's document is mid-write now
        return await asyncio.gather(first, kb.aingest([orchard]))

    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        one, two = kb.run_sync(both(kb))
        records = kb.list_documents()
    assert one.added == 1 and two.added == 1 and two.repaired == 0
    assert all(r.status == "complete" and r.chunks == 2 for r in records) and len(records) == 2


def test_hidden_points_do_not_crowd_out_the_top_k(tmp_path: Path, embedder: HashEmbedder) -> None:
    from flexmatch.config import ChainRef, QueryConfig

    doc = write(tmp_path / "docs", "harbour.md", HARBOUR)
    with memory_knowledge_base(tmp_path / "kb", embedder=embedder) as kb:
        kb.ingest([doc])
        kb.use_query_config(QueryConfig(retrieval="dense", reranker=ChainRef(chain="none")))
        registry = DocumentRegistry(kb.store)
        (record,) = registry.list("default")
        registry.begin("default", record, "v-in-flight")
        point = match_points(kb)[0]
        vector = embedder.embed(["When does the harbour open?"])[0]
        kb.store.upsert(
            "default",
            [
                StoredPoint(
                    id=f"00000000-0000-0000-0000-0000000000{i:02d}",
                    vector=vector,
                    text="x",
                    payload={**point, "version": "v-in-flight"},
                )
                for i in range(5)
            ],
        )
        results = kb.query("When does the harbour open?", top_k=3)
    assert results and all(r.signals.dense is not None for r in results)
    assert results[0].content == "The harbour opens at six in the morning."


def test_only_unfinished_documents_are_looked_up(tmp_path: Path, embedder: HashEmbedder) -> None:
    """Readers check versions only of documents with a write in flight: a finished one's
    points are all of its committed version; a document never committed shows nothing."""
    harbour = write(tmp_path / "d", "harbour.md", HARBOUR)
    orchard = write(tmp_path / "d", "orchard.md", ORCHARD)
    with memory_knowledge_base(tmp_path / "kb", embedder=embedder) as kb:
        kb.ingest([harbour, orchard])
        registry = DocumentRegistry(kb.store)
        assert registry.visibility("default").unfinished == {}
        first, second = registry.list("default")
        registry.begin("default", first, "v-next")
        brand_new = second.model_copy(update={"id": "new-doc", "version": None})
        registry.begin("default", brand_new, "v-first")
        seen = registry.visibility("default")
        assert seen.unfinished == {first.id: first.version, "new-doc": None}
        point = match_points(kb)[0]
        assert seen(_hit(point, second.id, "any"))  # finished: not looked up at all
        assert seen(_hit(point, first.id, str(first.version)))
        assert not seen(_hit(point, first.id, "v-next"))
        assert not seen(_hit(point, "new-doc", "v-first"))
        assert kb.query("apples picked")  # the finished documents are still found


def _hit(payload: dict[str, object], document_id: str, version: str) -> Hit:
    return Hit(id="p", payload={**payload, "document_id": document_id, "version": version})


def test_a_write_race_fails_the_document_as_a_write_conflict(
    tmp_path: Path, embedder: HashEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer begins a version of the document while it is indexed: this run's
    version is not committed, and the failure says why (a ``WriteConflictError``)."""
    from flexmatch.engine.ingest import commit, embed

    doc = write(tmp_path / "d", "harbour.md", HARBOUR)
    raised: list[BaseException] = []
    real_prepare = embed.prepare

    async def enrich_while_another_writes(document, chains, embed, limits=None):  # type: ignore[no-untyped-def]
        registry = DocumentRegistry(kb.store)
        record = registry.get("default", document.id)
        registry.begin("default", record, "another-writers-version")
        return await real_prepare(document, chains, embed, limits)

    real_index = commit.Indexer._index

    async def spying(self, document, chains, *rest):  # type: ignore[no-untyped-def]
        try:
            return await real_index(self, document, chains, *rest)
        except Exception as exc:
            raised.append(exc)
            raise

    monkeypatch.setattr(embed, "prepare", enrich_while_another_writes)
    monkeypatch.setattr(commit.Indexer, "_index", spying)
    with memory_knowledge_base(tmp_path / "kb", embedder=embedder) as kb:
        report = kb.ingest([doc])
    (failure,) = report.failed
    assert failure.error.endswith("another writer replaced it while it was indexed")
    assert [type(exc) for exc in raised] == [WriteConflictError]
