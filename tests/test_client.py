"""The remote ``Client`` speaks the ``KnowledgeBase`` API: the same tests run against an
embedded knowledge base and, through the client, against a real ``flexmatch serve`` on
127.0.0.1 (the ``served`` cases; tests/tiers.py marks them slow)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flexmatch import (
    Client,
    ConfigError,
    DocumentNotFoundError,
    FilterError,
    IngestReport,
    Job,
    KnowledgeBase,
    QueryError,
    SearchResult,
    ServiceError,
    SourceChoiceError,
)
from flexmatch.client import error_for
from flexmatch.engine.embedders import OnnxEmbedder
from tests.adapters.http.servers import PageServer, free_port
from tests.conftest import write_config
from tests.serving import KB_CONFIG, Served, served_kb

KEYS = """# Keys and locks

The spare key to the boathouse hangs on the hook behind the blue door.
"""
FERRY = """# Ferry

The last ferry to Gull Island leaves at 21:40 on Sundays from the north pier.
"""
PAGE = """<html><head><title>Tide tables</title></head><body><main>
<h1>Tide tables</h1><p>High water at the harbour mouth is at 06:12 on the first of May,
and the tidal range that day is 4.1 metres.</p></main></body></html>"""
RECORDS = [
    {"fact_id": "lighthouse", "subject": "Lighthouse", "text": "The lighthouse is painted red."},
    {"fact_id": "market", "subject": "Market", "text": "The fish market opens at 05:30."},
]
_tenants = itertools.count()

KB = KnowledgeBase | Client


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_kb(tmp_path_factory.mktemp("served") / "kb") as served:
        yield served


@pytest.fixture(params=["embedded", "served"])
def kb(request: pytest.FixtureRequest, tmp_path: Path, embedder: OnnxEmbedder) -> Iterator[KB]:
    """The same knowledge base, opened in this process or reached over HTTP (a tenant of
    its own on the module's server)."""
    if request.param == "embedded":
        write_config(tmp_path / "kb", KB_CONFIG)
        with KnowledgeBase.open(tmp_path / "kb", embedder=embedder, env={}) as local:
            yield local
    else:
        served: Served = request.getfixturevalue("server")
        with Client(served.url, served.key(f"t{next(_tenants)}")) as remote:
            yield remote


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "keys.md").write_text(KEYS, encoding="utf-8")
    (folder / "ferry.md").write_text(FERRY, encoding="utf-8")
    (folder / ".hidden.md").write_text("# Hidden\n\nNever ingested.", encoding="utf-8")
    return folder


def inputs(report: IngestReport) -> list[str]:
    return sorted(o.input for o in report.outcomes)


def test_ingest_a_folder_then_query_search_and_similar(kb: KB, notes: Path) -> None:
    report = kb.ingest([notes])
    assert isinstance(report, IngestReport)
    assert (report.added, report.changed, report.failed) == (2, 0, [])
    # each input named by its path, served or not
    assert inputs(report) == [str(notes / "ferry.md"), str(notes / "keys.md")]
    assert report.chunks >= 2 and len(report.document_ids) == 2

    results = kb.query("Where is the spare key to the boathouse?", top_n=2)
    assert all(isinstance(r, SearchResult) for r in results)
    assert "blue door" in results[0].content
    assert results[0].document_id in report.document_ids
    assert results[0].title == "Keys and locks" and results[0].source == "default"
    assert results[0].signals.rerank is not None  # the explanation travels as signals
    assert results[0].location is not None and "keys.md" in results[0].cite

    answer = kb.search("When does the last ferry leave on Sunday?", top_n=1)
    assert "21:40" in answer.results[0].content and answer.query.startswith("When")

    similar = asyncio.run(kb.asimilar("ferry to Gull Island", top_n=1))
    assert "Gull Island" in similar[0].content

    again = kb.ingest([notes])  # unchanged files are reported as such
    assert (again.added, again.unchanged) == (0, 2)


def test_async_ingest_and_query(kb: KB, notes: Path) -> None:
    async def run() -> tuple[IngestReport, list[SearchResult]]:
        report = await kb.aingest([notes / "ferry.md"])
        return report, await kb.aquery("last ferry Sunday", top_n=1)

    report, results = asyncio.run(run())
    assert report.added == 1 and "21:40" in results[0].content


def test_records_and_web_pages(kb: KB) -> None:
    records = kb.add_records(RECORDS, source="facts")
    assert records.added == 2 and records.failed == []
    with PageServer(PAGE) as page:
        pages = asyncio.run(kb.aingest_urls([page.url], source="web"))
    assert pages.added == 1, pages.failed
    found = kb.query("What colour is the lighthouse?", top_n=1)
    assert found[0].title == "Lighthouse" and found[0].source == "facts"
    tide = kb.query("When is high water at the harbour mouth?", top_n=1)
    assert "06:12" in tide[0].content and tide[0].source == "web"
    assert kb.query("fish market", filters={"source": "facts"}, top_n=5)[0].source == "facts"


def test_documents_list_show_and_remove(kb: KB, notes: Path) -> None:
    kb.ingest([notes])
    listed = kb.list_documents()
    assert sorted(r.title for r in listed) == ["Ferry", "Keys and locks"]
    assert all(r.status == "complete" for r in listed)
    ferry = next(r for r in listed if r.title == "Ferry")
    detail = kb.get_document(ferry.id)
    assert detail.document.id == ferry.id
    assert "21:40" in " ".join(c.content for c in detail.chunks)
    assert detail.chunks[0].matching_texts
    assert kb.stats().documents == 2
    assert kb.list_documents(source="facts") == []

    kb.remove_document(ferry.id)
    assert [r.title for r in kb.list_documents()] == ["Keys and locks"]
    with pytest.raises(DocumentNotFoundError, match=ferry.id):
        kb.get_document(ferry.id)
    with pytest.raises(DocumentNotFoundError, match=ferry.id):
        kb.remove_document(ferry.id)


def test_errors_are_the_same_classes(kb: KB, tmp_path: Path, notes: Path) -> None:
    with pytest.raises(FilterError, match="colour"):
        kb.query("anything", filters={"colour": 1.5})
    with pytest.raises(ConfigError, match="'nowhere'"):  # served: its SourceChoiceError
        kb.add_records(RECORDS, source="nowhere")
    with pytest.raises(ConfigError, match="'nowhere'"):
        kb.ingest([notes], source="nowhere")
    with pytest.raises(QueryError, match="empty") as empty:  # embedded and served alike
        kb.query("   ")
    assert empty.value.code == "empty_query"
    missing = tmp_path / "missing.md"
    report = kb.ingest([missing])
    assert report.failed and str(missing) in report.failed[0].error
    assert "no such file or folder" in report.failed[0].error


# -- the client alone ---------------------------------------------------------------------
def test_jobs_can_be_followed(server: Served, notes: Path) -> None:
    with Client(server.url, server.key(f"jobs{next(_tenants)}")) as client:
        job = client.submit_files([notes / "keys.md"])
        assert isinstance(job, Job) and job.kind == "upload" and job.total == 1
        seen: list[int] = []
        done = client.wait_for_job(job.id, progress=lambda r: seen.append(r.processed))
        assert done.status == "done" and done.counts.added == 1 and seen[-1] == 1
        assert [j.id for j in client.jobs()] == [job.id]
        assert done.report().added == 1
        with pytest.raises(ServiceError, match="no job 'nope'") as unknown:
            client.job("nope")
        assert unknown.value.status == 404


def test_keys_and_permissions_are_service_errors(server: Served) -> None:
    with Client(server.url, "not-a-key") as client, pytest.raises(ServiceError) as bad:
        client.query("anything")
    assert bad.value.status == 401
    reader = server.key(f"r{next(_tenants)}", "read")
    with Client(server.url, reader) as client, pytest.raises(ServiceError) as denied:
        client.add_records(RECORDS, source="facts")
    assert denied.value.status == 403 and "write" in str(denied.value)


def test_a_file_over_the_servers_body_cap_fails_alone(tmp_path: Path) -> None:
    """Files sent together over the server's cap are sent one by one; the one that is
    over it alone fails, named, and the others are stored (as an embedded ingest does)."""
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "small.md").write_text(KEYS, encoding="utf-8")
    (folder / "big.md").write_text("# Big\n\n" + "All work and no play. " * 5_000, "utf-8")
    capped = served_kb(tmp_path / "kb", KB_CONFIG, "--max-body-mb", "0.05")
    with capped as served, Client(served.url, served.key("capped")) as client:
        report = client.ingest([folder])
    assert report.added == 1 and [r.input for r in report.outcomes if r.document_id] == [
        str((folder / "small.md").resolve())
    ]
    (failed,) = report.failed
    assert failed.uri == str(folder / "big.md") and "413" not in failed.error
    assert "52,428-byte limit" in failed.error, failed.error  # the server's own message


def test_an_unreachable_server_is_one_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url, "key") as client, pytest.raises(ServiceError, match="connection refused"):
        client.stats()
    with pytest.raises(ConfigError, match="must start with http"):
        Client("localhost:8000")


def test_error_answers_map_to_the_embedded_classes() -> None:
    assert isinstance(error_for(422, "invalid_filter", "x"), FilterError)
    source = error_for(422, "unknown_source", "unknown source 'a'")
    assert isinstance(source, SourceChoiceError) and source.code == "unknown_source"
    too_long = error_for(422, "query_too_long", "the query is 2,001 characters, over …")
    assert isinstance(too_long, QueryError) and too_long.code == "query_too_long"
    assert isinstance(
        error_for(404, "not_found", "no document 'a'", DocumentNotFoundError), DocumentNotFoundError
    )
    limited = error_for(429, "rate_limited", "slow down")
    assert isinstance(limited, ServiceError) and (limited.status, limited.code) == (
        429,
        "rate_limited",
    )


def test_a_job_reads_as_the_embedded_report() -> None:
    job = Job.model_validate(
        {
            "id": "j1",
            "kind": "upload",
            "status": "done",
            "total": 4,
            "processed": 4,
            "documents": [
                {
                    "input": "a.md",
                    "outcome": "added",
                    "document_id": "d1",
                    "chunks": 2,
                    "matching_texts": 6,
                },
                {"input": "b.md", "outcome": "unchanged", "document_id": "d2"},
                {"input": "c.md", "outcome": "duplicate", "document_id": "d1", "error": "same"},
                {"input": "d.md", "outcome": "failed", "error": "d.md: empty"},
            ],
            "usage": {"calls": 3},
            "created_at": "2026-01-01T00:00:00+00:00",
            "started_at": "2026-01-01T00:00:01+00:00",
            "finished_at": "2026-01-01T00:00:03.5+00:00",
        }
    )
    report = job.report()
    assert (report.planned, report.added, report.unchanged, report.chunks) == (4, 1, 1, 2)
    assert report.document_ids == ["d1", "d2"] and report.usage.calls == 3
    assert report.duplicates[0].document_id == "d1" and report.failed[0].error == "d.md: empty"
    assert [o.outcome for o in report.outcomes] == ["added", "unchanged", "duplicate", "failed"]
    assert report.seconds == 2.5


def test_the_server_sends_the_public_job_without_its_tenant() -> None:
    """The client parses what the server keeps: one ``Job`` model, the server's adding only
    whose job it is (tenant, owner), never sent."""
    from flexmatch.adapters.http.jobs import TenantJob

    assert issubclass(TenantJob, Job)
    kept_only = set(TenantJob.model_fields) - set(Job.model_fields)
    assert kept_only == {"tenant", "owner"}  # whose it is: never sent
    kept = TenantJob(id="j1", kind="upload", total=1, created_at="2026-12-01T00:00:00", tenant="t")
    sent = kept.model_dump(mode="json")
    assert not kept_only & set(sent)
    assert Job.model_validate(sent) == Job.model_validate(kept.model_dump())


def test_a_429_is_waited_out_and_asked_again() -> None:
    """Overload answers (429 with Retry-After) are retried; the caller sees the answer."""
    answers = iter(
        [
            httpx.Response(429, headers={"Retry-After": "0"}, json={}),
            httpx.Response(
                200,
                json={
                    "tenant": "t",
                    "documents": 0,
                    "incomplete_documents": 0,
                    "chunks": 0,
                    "matching_texts": 0,
                    "sources": {},
                    "store_bytes": None,
                },
            ),
        ]
    )
    asked: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return next(answers)

    with Client("http://kb.test", "k", transport=httpx.MockTransport(handler)) as client:
        assert client.stats().tenant == "t"
    assert len(asked) == 2 and asked[0].headers["Authorization"] == "Bearer k"
