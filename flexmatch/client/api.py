"""``Client``'s operations: each ``KnowledgeBase`` method a served knowledge base offers,
written once as a flow of requests (``Connection`` drives it, blocking or async) with a
sync method and its ``a``-prefixed async twin."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import TypeAdapter

from flexmatch.access import Principal, principal_headers
from flexmatch.client.answers import (
    JOBS,
    RAW,
    answer_error,
    attachment_name,
    parsed,
    search_result,
)
from flexmatch.client.connection import Connection, Flow
from flexmatch.client.uploads import (
    BATCH_RECORDS,
    BATCH_URLS,
    chunks,
    file_batches,
    relabelled,
    sorted_inputs,
)
from flexmatch.contract import KnowledgeBaseProtocol
from flexmatch.engine.archive import Original
from flexmatch.errors import ConfigError, DocumentNotFoundError, FlexMatchError, ServiceError
from flexmatch.models import (
    DocumentDetail,
    DocumentRecord,
    ExpandMode,
    FailedDocument,
    FeedbackReceipt,
    GrepResult,
    IngestReport,
    Job,
    Outline,
    Reading,
    SearchResult,
    Stats,
)
from flexmatch.results import Answer, Depth, SearchCost

T = TypeVar("T")
Progress = Callable[[IngestReport], None]

PAGE = 500  # documents per listing page (the server's maximum)


class Client(Connection):
    """A knowledge base served by ``flexmatch serve`` at ``url``, used with an API key.

    ``api_key`` defaults to ``$FLEXMATCH_API_KEY``; ``timeout`` (seconds) bounds each
    request as a whole, connect, send and the whole answer, however slowly a server
    sends it (not a whole ingest: ``job_timeout`` does, unlimited by default);
    ``max_answer_bytes`` (64 MiB) refuses a larger answer as it streams in, unread.
    Both fail as a ``ServiceError`` naming the limit. ``principal``: the end user a
    service (or admin) key acts for, sent on every request as
    ``X-FlexMatch-Principal``/``X-FlexMatch-Groups``; the searches also take one per call.
    Without it, the key decides (docs/security.md): a service key reads only what its
    whole tenant may. Use it as a context manager, or call ``close`` (and ``aclose``
    after async calls)."""

    def _call(
        self,
        method: str,
        path: str,
        model: type[T] | TypeAdapter[T],
        *,
        missing: type[FlexMatchError] | None = None,
        **kwargs: Any,
    ) -> Flow[T]:
        """One request, its answer parsed into ``model`` (or raised as its error)."""
        response = yield self._request(method, path, **kwargs)
        assert response is not None
        if response.status_code >= 400:
            raise answer_error(response, missing)
        return parsed(response, model)

    # -- query ---------------------------------------------------------------------------
    def _search(
        self,
        text: str,
        top_n: int | None,
        filters: dict[str, Any] | None,
        depth: Depth = "fast",
        principal: Principal | None = None,
        expand: ExpandMode | None = None,
    ) -> Flow[Answer]:
        body = {"query": text, "top_n": top_n, "filters": filters, "explain": True}
        if depth != "fast":  # a fast search's request is as it always was
            body["depth"] = depth
        if expand is not None:  # unset: the server's query.expand
            body["expand"] = expand
        headers = principal_headers(principal)
        raw = yield from self._call("POST", "/v1/search", RAW, json=body, headers=headers)
        return Answer(
            query=raw.get("query", text),
            variants=raw.get("variants") or [],
            results=[search_result(item) for item in raw.get("results", [])],
            warnings=raw.get("warnings") or [],
            took_ms=float(raw.get("took_ms", 0.0)),
            cost=SearchCost.model_validate(raw["cost"]) if raw.get("cost") else None,
        )

    def _similar(
        self,
        text: str,
        top_n: int,
        filters: dict[str, Any] | None,
        principal: Principal | None = None,
    ) -> Flow[list[SearchResult]]:
        body = {"text": text, "top_n": top_n, "filters": filters}
        headers = principal_headers(principal)
        raw = yield from self._call("POST", "/v1/search/similar", RAW, json=body, headers=headers)
        return [search_result(item) for item in raw.get("results", [])]

    def search(
        self,
        text: str,
        *,
        top_n: int | None = None,
        filters: dict[str, Any] | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        principal: Principal | None = None,
    ) -> Answer:
        """The whole answer to ``text``: the variants searched, the results best first.
        ``principal``: search as this end user (a service or admin key's), instead of
        the client's own ``principal``."""
        return self._run(self._search(text, top_n, filters, depth, principal, expand))

    async def asearch(
        self,
        text: str,
        *,
        top_n: int | None = None,
        filters: dict[str, Any] | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        principal: Principal | None = None,
    ) -> Answer:
        return await self._arun(self._search(text, top_n, filters, depth, principal, expand))

    def query(
        self,
        text: str,
        *,
        top_n: int | None = None,
        filters: dict[str, Any] | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        principal: Principal | None = None,
    ) -> list[SearchResult]:
        """The chunks that best answer ``text``, best first (``principal``: see ``search``)."""
        found = self.search(
            text, top_n=top_n, filters=filters, depth=depth, expand=expand, principal=principal
        )
        return found.results

    async def aquery(
        self,
        text: str,
        *,
        top_n: int | None = None,
        filters: dict[str, Any] | None = None,
        depth: Depth = "fast",
        expand: ExpandMode | None = None,
        principal: Principal | None = None,
    ) -> list[SearchResult]:
        answer = await self.asearch(
            text, top_n=top_n, filters=filters, depth=depth, expand=expand, principal=principal
        )
        return answer.results

    def similar(
        self,
        text: str,
        *,
        top_n: int = 5,
        filters: dict[str, Any] | None = None,
        principal: Principal | None = None,
    ) -> list[SearchResult]:
        """The chunks most similar to ``text``: no query rewrite, no reranking."""
        return self._run(self._similar(text, top_n, filters, principal))

    async def asimilar(
        self,
        text: str,
        *,
        top_n: int = 5,
        filters: dict[str, Any] | None = None,
        principal: Principal | None = None,
    ) -> list[SearchResult]:
        return await self._arun(self._similar(text, top_n, filters, principal))

    # -- jobs ----------------------------------------------------------------------------
    def _job(self, job_id: str) -> Flow[Job]:
        path = f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}"
        return (yield from self._call("GET", path, Job))

    def _wait(self, job: Job, progress: Progress | None = None) -> Flow[Job]:
        """Poll ``job`` until it is done or failed (``job_timeout`` bounds the wait)."""
        started = time.monotonic()
        pause = min(0.05, self.poll_interval)
        seen = -1
        while True:
            if progress is not None and job.processed != seen:
                seen = job.processed
                progress(job.report())
            if job.finished:
                return job
            if self.job_timeout is not None and time.monotonic() - started > self.job_timeout:
                raise ServiceError(
                    0,
                    "job_timeout",
                    f"job {job.id} is still {job.status} ({job.processed} of {job.total} "
                    f"inputs) after {self.job_timeout:g}s; it goes on on the server: "
                    f"follow it with job('{job.id}')",
                )
            yield pause
            pause = min(self.poll_interval, pause * 2)
            job = yield from self._job(job.id)

    def job(self, job_id: str) -> Job:
        """A job's status, progress counts and the outcome of each document so far."""
        return self._run(self._job(job_id))

    async def ajob(self, job_id: str) -> Job:
        return await self._arun(self._job(job_id))

    def jobs(self) -> list[Job]:
        """The tenant's jobs, newest first."""
        return self._run(self._call("GET", "/v1/jobs", JOBS))

    async def ajobs(self) -> list[Job]:
        return await self._arun(self._call("GET", "/v1/jobs", JOBS))

    def wait_for_job(self, job_id: str, progress: Progress | None = None) -> Job:
        """The job once it is done or failed."""
        return self._run(self._waited(job_id, progress))

    async def await_job(self, job_id: str, progress: Progress | None = None) -> Job:
        return await self._arun(self._waited(job_id, progress))

    def _waited(self, job_id: str, progress: Progress | None) -> Flow[Job]:
        job = yield from self._job(job_id)
        return (yield from self._wait(job, progress))

    # -- ingest --------------------------------------------------------------------------
    def _accepted(self, method: str, path: str, **kwargs: Any) -> Flow[Job]:
        """Start a job; the job as it stands right after."""
        accepted = yield from self._call(method, path, RAW, **kwargs)
        return (yield from self._job(str(accepted["job_id"])))

    def _submit_files(
        self, files: list[tuple[str, bytes]], source: str | None, metadata: dict[str, Any] | None
    ) -> Flow[Job]:
        data: dict[str, str] = {}
        if source is not None:
            data["source"] = source
        if metadata is not None:
            data["metadata"] = json.dumps(metadata)
        parts = [("files", (name, content)) for name, content in files]
        return (yield from self._accepted("POST", "/v1/documents", files=parts, data=data))

    def _submit_urls(self, urls: list[str], source: str | None) -> Flow[Job]:
        body = {"urls": urls, "source": source}
        return (yield from self._accepted("POST", "/v1/documents/url", json=body))

    def _submit_records(self, records: list[Any], source: str | None) -> Flow[Job]:
        body = {"records": records, "source": source}
        return (yield from self._accepted("POST", "/v1/records", json=body))

    def submit_files(
        self,
        paths: Iterable[str | Path],
        *,
        source: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Job:
        """Upload files as one job and return it at once (``wait_for_job`` follows it)."""
        files = [(Path(p).name, Path(p).read_bytes()) for p in paths]
        return self._run(self._submit_files(files, source, metadata))

    def submit_urls(self, urls: Iterable[str], *, source: str | None = None) -> Job:
        """Import web pages as one job and return it at once."""
        return self._run(self._submit_urls(list(urls), source))

    def submit_records(self, records: Iterable[Any], *, source: str | None = None) -> Job:
        """Add records as one job and return it at once."""
        return self._run(self._submit_records(list(records), source))

    def _ingest(
        self, inputs: Iterable[str | Path], source: str | None, progress: Progress | None
    ) -> Flow[IngestReport]:
        """Files, folders and URLs, as jobs of at most a batch each, one after another;
        one report for all of them, in the order an embedded ingest reports them (web
        pages first). A path that cannot be read fails alone, here, as it does there."""
        inputs = list(inputs)
        if not inputs:
            raise ConfigError(
                "nothing to ingest: name files, folders or URLs (a served knowledge base "
                "ingests what it is sent)"
            )
        urls, paths, local = sorted_inputs(inputs)
        reports: list[IngestReport] = []
        done = IngestReport()

        def tracked(report: IngestReport) -> None:
            if progress is not None:
                progress(IngestReport.combined([done, report, local]))

        for batch in chunks(urls, BATCH_URLS):
            job = yield from self._submit_urls(batch, source)
            report = (yield from self._wait(job, tracked if progress else None)).report()
            reports.append(report)
            done = IngestReport.combined(reports)
        batches = list(file_batches(paths))
        while batches:
            uploads, failed = batches.pop(0)
            for failure in failed:
                local.record_failed(failure)
            if not uploads:
                continue
            files = [(name, path.read_bytes()) for name, path in uploads]
            try:
                job = yield from self._submit_files(files, source, None)
            except ServiceError as exc:
                if exc.status != 413:
                    raise
                if len(uploads) > 1:  # over the server's body cap together: one at a time
                    batches[:0] = [([one], []) for one in uploads]
                    continue
                uri = str(uploads[0][1])
                local.record_failed(FailedDocument(uri=uri, error=f"{uri}: {exc}"))
                continue
            report = (yield from self._wait(job, tracked if progress else None)).report()
            reports.append(relabelled(report, {n: str(p.resolve()) for n, p in uploads}))
            done = IngestReport.combined(reports)
        combined = IngestReport.combined([*reports, local])
        combined.planned = combined.processed
        return combined

    def ingest(
        self,
        inputs: Iterable[str | Path] = (),
        *,
        source: str | None = None,
        progress: Progress | None = None,
    ) -> IngestReport:
        """Upload files and folders and import http(s) URLs into ``source``, and wait for
        the server to index them."""
        return self._run(self._ingest(list(inputs), source, progress))

    async def aingest(
        self,
        inputs: Iterable[str | Path] = (),
        *,
        source: str | None = None,
        progress: Progress | None = None,
    ) -> IngestReport:
        return await self._arun(self._ingest(list(inputs), source, progress))

    def _ingest_urls(self, urls: list[str], source: str | None) -> Flow[IngestReport]:
        reports = []
        for batch in chunks(urls, BATCH_URLS):
            job = yield from self._submit_urls(batch, source)
            reports.append((yield from self._wait(job)).report())
        return IngestReport.combined(reports)

    def ingest_urls(self, urls: Iterable[str], *, source: str | None = None) -> IngestReport:
        """Import web pages (under the server's web safety rules) and wait for them."""
        return self._run(self._ingest_urls(list(urls), source))

    async def aingest_urls(self, urls: Iterable[str], *, source: str | None = None) -> IngestReport:
        return await self._arun(self._ingest_urls(list(urls), source))

    def _add_records(self, records: list[Any], source: str | None) -> Flow[IngestReport]:
        reports = []
        for batch in chunks(records, BATCH_RECORDS):
            job = yield from self._submit_records(batch, source)
            reports.append((yield from self._wait(job)).report())
        return IngestReport.combined(reports)

    def add_records(self, records: Iterable[Any], *, source: str | None = None) -> IngestReport:
        """Ingest structured records through a records source's template, and wait."""
        return self._run(self._add_records(list(records), source))

    async def aadd_records(
        self, records: Iterable[Any], *, source: str | None = None
    ) -> IngestReport:
        return await self._arun(self._add_records(list(records), source))

    # -- documents -----------------------------------------------------------------------
    def _list(self, source: str | None) -> Flow[list[DocumentRecord]]:
        records: list[DocumentRecord] = []
        while True:
            params: dict[str, Any] = {"limit": PAGE, "offset": len(records)}
            if source is not None:
                params["source"] = source
            page = yield from self._call("GET", "/v1/documents", RAW, params=params)
            items = TypeAdapter(list[DocumentRecord]).validate_python(page.get("items", []))
            records += items
            if not items or len(records) >= int(page.get("total", 0)):
                return records

    def _document_path(self, document_id: str) -> str:
        return f"/v1/documents/{urllib.parse.quote(document_id, safe='')}"

    def list_documents(self, *, source: str | None = None) -> list[DocumentRecord]:
        """The tenant's documents (every page of them), sorted by source and uri."""
        return self._run(self._list(source))

    async def alist_documents(self, *, source: str | None = None) -> list[DocumentRecord]:
        return await self._arun(self._list(source))

    def get_document(self, document_id: str) -> DocumentDetail:
        """A document with its chunks, matching texts and qualifying texts."""
        path = self._document_path(document_id)
        return self._run(self._call("GET", path, DocumentDetail, missing=DocumentNotFoundError))

    async def aget_document(self, document_id: str) -> DocumentDetail:
        path = self._document_path(document_id)
        return await self._arun(
            self._call("GET", path, DocumentDetail, missing=DocumentNotFoundError)
        )

    def _outline(self, document_id: str) -> Flow[Outline]:
        path = self._document_path(document_id) + "/outline"
        return self._call("GET", path, Outline, missing=DocumentNotFoundError)

    def outline(self, document_id: str) -> Outline:
        """A document's headings, each with its location and chunks."""
        return self._run(self._outline(document_id))

    async def aoutline(self, document_id: str) -> Outline:
        return await self._arun(self._outline(document_id))

    def _read(self, document_id: str, part: dict[str, Any]) -> Flow[Reading]:
        path = self._document_path(document_id) + "/read"
        body = {name: value for name, value in part.items() if value is not None}
        return self._call("POST", path, Reading, missing=DocumentNotFoundError, json=body)

    def read(
        self,
        document_id: str,
        *,
        section: str | None = None,
        pages: tuple[int, int] | None = None,
        lines: tuple[int, int] | None = None,
        chunk: int | None = None,
        before: int = 0,
        after: int = 0,
    ) -> Reading:
        """Part of a document (a section, pages, lines, a chunk and its neighbours), bounded."""
        part = dict(
            section=section, pages=pages, lines=lines, chunk=chunk, before=before, after=after
        )
        return self._run(self._read(document_id, part))

    async def aread(
        self,
        document_id: str,
        *,
        section: str | None = None,
        pages: tuple[int, int] | None = None,
        lines: tuple[int, int] | None = None,
        chunk: int | None = None,
        before: int = 0,
        after: int = 0,
    ) -> Reading:
        part = dict(
            section=section, pages=pages, lines=lines, chunk=chunk, before=before, after=after
        )
        return await self._arun(self._read(document_id, part))

    def _grep(self, body: dict[str, Any]) -> Flow[GrepResult]:
        return self._call("POST", "/v1/grep", GrepResult, json=body)

    def grep(
        self,
        pattern: str,
        *,
        regex: bool = False,
        ignore_case: bool = False,
        filters: dict[str, Any] | None = None,
        limit: int = 20,
    ) -> GrepResult:
        """The lines of the stored text holding ``pattern`` (or matching it, ``regex``), cited."""
        body = dict(
            pattern=pattern, regex=regex, ignore_case=ignore_case, filters=filters, limit=limit
        )
        return self._run(self._grep(body))

    async def agrep(
        self,
        pattern: str,
        *,
        regex: bool = False,
        ignore_case: bool = False,
        filters: dict[str, Any] | None = None,
        limit: int = 20,
    ) -> GrepResult:
        body = dict(
            pattern=pattern, regex=regex, ignore_case=ignore_case, filters=filters, limit=limit
        )
        return await self._arun(self._grep(body))

    def remove_document(self, document_id: str) -> None:
        """Remove a document and everything derived from it."""
        path = self._document_path(document_id)
        self._run(self._call("DELETE", path, RAW, missing=DocumentNotFoundError))

    async def aremove_document(self, document_id: str) -> None:
        path = self._document_path(document_id)
        await self._arun(self._call("DELETE", path, RAW, missing=DocumentNotFoundError))

    def stats(self) -> Stats:
        """Documents, chunks and matching texts per source in the key's tenant."""
        return self._run(self._call("GET", "/v1/stats", Stats))

    async def astats(self) -> Stats:
        return await self._arun(self._call("GET", "/v1/stats", Stats))

    # -- feedback ------------------------------------------------------------------------
    def _feedback(
        self, query: str, chunk_id: str, helpful: bool, principal: Principal | None
    ) -> Flow[FeedbackReceipt]:
        body = {"query": query, "chunk_id": chunk_id, "helpful": helpful}
        headers = principal_headers(principal)
        return (
            yield from self._call(
                "POST",
                "/v1/feedback",
                FeedbackReceipt,
                missing=DocumentNotFoundError,
                json=body,
                headers=headers,
            )
        )

    def add_feedback(
        self,
        query: str,
        chunk_id: str,
        helpful: bool = True,
        *,
        principal: Principal | None = None,
    ) -> FeedbackReceipt:
        """Whether ``chunk_id`` answered ``query`` (the key needs the ``feedback``
        permission): helpful makes the query a learned matching text of the chunk,
        unhelpful demotes it for queries near this one. ``principal``: see ``search``."""
        return self._run(self._feedback(query, chunk_id, helpful, principal))

    async def aadd_feedback(
        self,
        query: str,
        chunk_id: str,
        helpful: bool = True,
        *,
        principal: Principal | None = None,
    ) -> FeedbackReceipt:
        return await self._arun(self._feedback(query, chunk_id, helpful, principal))

    def _learned_path(self, learned_id: str) -> str:
        return f"/v1/learned/{urllib.parse.quote(learned_id, safe='')}"

    def remove_learned(self, learned_id: str) -> None:
        """Remove a learned matching text (its id: ``get_document``; an admin key's)."""
        path = self._learned_path(learned_id)
        self._run(self._call("DELETE", path, RAW, missing=DocumentNotFoundError))

    async def aremove_learned(self, learned_id: str) -> None:
        path = self._learned_path(learned_id)
        await self._arun(self._call("DELETE", path, RAW, missing=DocumentNotFoundError))

    # -- originals -----------------------------------------------------------------------
    def _original(self, document_id: str) -> Flow[Original]:
        path = self._document_path(document_id) + "/original"
        response = yield self._request("GET", path)
        assert response is not None
        if response.status_code >= 400:
            raise answer_error(response, DocumentNotFoundError)
        return Original(filename=attachment_name(response, document_id), data=response.content)

    def get_original(self, document_id: str) -> Original:
        """The file a document was uploaded as, byte for byte (uploads only: an ingest
        through ``Client`` uploads its files)."""
        return self._run(self._original(document_id))

    async def aget_original(self, document_id: str) -> Original:
        return await self._arun(self._original(document_id))


if TYPE_CHECKING:

    def _conforms(client: Client) -> KnowledgeBaseProtocol:
        """mypy fails here when ``Client`` drifts from the shared protocol."""
        return client
