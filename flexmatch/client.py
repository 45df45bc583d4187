"""``Client``: a served knowledge base (``flexmatch serve``) behind the ``KnowledgeBase`` API.

The methods, their names and their result types are those of ``KnowledgeBase`` (sync,
and async with an ``a`` prefix), so code moves from an embedded knowledge base to a
served one by changing the line that opens it::

    kb = KnowledgeBase.open("my-kb")                        # embedded
    kb = Client("http://kb.internal:8000", api_key="fm_...")  # served

What differs is what a service decides: the API key names the tenant (there is no
``tenant=`` argument), and an ingest is a background job on the server; ``ingest`` waits
for its jobs and returns their ``IngestReport``, ``submit_*`` return the ``Job`` at once.

Each operation is written once, as a generator that yields the HTTP requests it needs (or
a pause while a job runs) and gets back the responses; a sync and an async driver send
them with httpx. An error answer becomes the ``FlexMatchError`` subclass the embedded call
would raise, with the server's message.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.parse
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import TypeAdapter, ValidationError

from flexmatch.errors import (
    ChainError,
    ConfigError,
    DocumentNotFoundError,
    EmbeddingError,
    FilterError,
    FlexMatchError,
    LLMError,
    ParseError,
    ServiceError,
    SourceChoiceError,
    StoreError,
    WebImportError,
    WriteConflictError,
)
from flexmatch.models import (
    DocumentDetail,
    DocumentRecord,
    FailedDocument,
    IngestReport,
    Job,
    SearchResult,
    Stats,
)
from flexmatch.results import Answer

T = TypeVar("T")
# a step of an operation: a request to send, or seconds to wait (a job is running)
Step = httpx.Request | float
Flow = Generator[Step, httpx.Response | None, T]
Progress = Callable[[IngestReport], None]

# what one request carries at most: the server's defaults (Limits) leave room above these
BATCH_BYTES = 32 * 1024 * 1024
BATCH_FILES = 100
BATCH_URLS = 100
BATCH_RECORDS = 1_000
PAGE = 500  # documents per listing page (the server's maximum)
RETRIES = 4  # answers 429 or 503 with Retry-After, waited out before giving up
MAX_RETRY_WAIT = 30.0

# the error the embedded call raises, by the server's error code
_BY_CODE: dict[str, type[FlexMatchError]] = {
    "invalid_filter": FilterError,
    "web_import_refused": WebImportError,
    "parse_error": ParseError,
    "invalid_request": ConfigError,
    "store_unavailable": StoreError,
    "embedding_unavailable": EmbeddingError,
    "llm_error": LLMError,
    "chain_error": ChainError,
    "write_conflict": WriteConflictError,
}
_SOURCE_CODES = ("unknown_source", "no_records_source", "not_a_records_source")


def error_for(
    status: int, code: str, message: str, missing: type[FlexMatchError] | None = None
) -> FlexMatchError:
    """The ``FlexMatchError`` for an error answer: the class the embedded call raises
    (a 404 is ``missing``, e.g. ``DocumentNotFoundError``), else a ``ServiceError``."""
    if code in _SOURCE_CODES:
        return SourceChoiceError(code, message)
    if status == 404 and code == "not_found" and missing is not None:
        return missing(message)
    kind = _BY_CODE.get(code)
    if kind is not None:
        return kind(message)
    if status == 422:  # a request the server's rules refuse (empty query, too many items)
        return ConfigError(message)
    return ServiceError(status, code, message)


def _failure(response: httpx.Response, missing: type[FlexMatchError] | None) -> FlexMatchError:
    """The error an answer that is not a success stands for."""
    try:
        body = response.json()["error"]
        code, message = str(body["code"]), str(body["message"])
    except (ValueError, KeyError, TypeError):
        reason = response.reason_phrase or "error"
        code = "http_error"
        message = f"{response.request.url} answered HTTP {response.status_code} {reason}"
    return error_for(response.status_code, code, message, missing)


def _parsed(response: httpx.Response, model: type[T] | TypeAdapter[T]) -> T:
    adapter = model if isinstance(model, TypeAdapter) else TypeAdapter(model)
    try:
        return adapter.validate_json(response.content)
    except ValidationError as exc:
        raise ServiceError(
            response.status_code,
            "unexpected_answer",
            f"{response.request.url} answered something that is not a FlexMatch response "
            f"({exc.error_count()} problem(s), first: {exc.errors()[0]['msg']}); "
            "is the URL that of a flexmatch serve?",
        ) from None


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait before asking again, for a 429 or a 503 that says so."""
    if response.status_code not in (429, 503):
        return None
    header = response.headers.get("Retry-After")
    if header is None:
        return None if response.status_code == 503 else 1.0
    try:
        return min(MAX_RETRY_WAIT, max(0.0, float(header)))
    except ValueError:
        return 1.0


def _unreachable(url: str, exc: httpx.TransportError) -> ServiceError:
    """A transport failure said as a person would say it."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        why = "connection refused" if "refused" in text.lower() else f"cannot connect ({text})"
    elif isinstance(exc, httpx.TimeoutException):
        why = "no answer in time"
    else:
        why = text
    return ServiceError(0, "unreachable", f"{url}: {why}")


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _walk(folder: Path) -> Iterator[Path]:
    """A folder's files as an embedded ingest walks them: sorted, no hidden entries,
    no symlinks."""
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        if entry.is_dir():
            yield from _walk(entry)
        elif entry.is_file():
            yield entry


class Client:
    """A knowledge base served by ``flexmatch serve`` at ``url``, used with an API key.

    ``api_key`` defaults to ``$FLEXMATCH_API_KEY``; ``timeout`` bounds each request (not
    a whole ingest: ``job_timeout`` does, unlimited by default). Use it as a context
    manager, or call ``close`` (and ``aclose`` after async calls)."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        job_timeout: float | None = None,
        poll_interval: float = 0.25,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not _is_url(url):
            raise ConfigError(f"{url!r}: the server's URL must start with http:// or https://")
        self.url = url.rstrip("/")
        key = api_key if api_key is not None else os.environ.get("FLEXMATCH_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.timeout = timeout
        self.job_timeout = job_timeout
        self.poll_interval = poll_interval
        self._http = httpx.Client(
            base_url=self.url, headers=self._headers, timeout=timeout, transport=transport
        )
        self._async_transport = async_transport
        self._ahttp: httpx.AsyncClient | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # -- driving an operation ------------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Request:
        return self._http.build_request(method, path, **kwargs)

    def _run(self, flow: Flow[T]) -> T:
        """Run an operation with blocking I/O."""
        reply: httpx.Response | None = None
        while True:
            try:
                step = flow.send(reply)
            except StopIteration as done:
                return done.value
            if isinstance(step, float):
                time.sleep(step)
                reply = None
                continue
            for _ in range(RETRIES + 1):
                try:
                    reply = self._http.send(step)
                except httpx.TransportError as exc:
                    raise _unreachable(self.url, exc) from None
                wait = _retry_after(reply)
                if wait is None:
                    break
                time.sleep(wait)

    def _async_http(self) -> httpx.AsyncClient:
        """The async connection pool of the running event loop (a pool cannot outlive
        its loop, and sync callers may run each call in a loop of its own)."""
        loop = asyncio.get_running_loop()
        if self._ahttp is None or self._aloop is not loop:
            self._ahttp = httpx.AsyncClient(
                base_url=self.url,
                headers=self._headers,
                timeout=self.timeout,
                transport=self._async_transport,
            )
            self._aloop = loop
        return self._ahttp

    async def _arun(self, flow: Flow[T]) -> T:
        """Run an operation on the event loop."""
        http = self._async_http()
        reply: httpx.Response | None = None
        while True:
            try:
                step = flow.send(reply)
            except StopIteration as done:
                return done.value
            if isinstance(step, float):
                await asyncio.sleep(step)
                reply = None
                continue
            for _ in range(RETRIES + 1):
                try:
                    reply = await http.send(step)
                except httpx.TransportError as exc:
                    raise _unreachable(self.url, exc) from None
                wait = _retry_after(reply)
                if wait is None:
                    break
                await asyncio.sleep(wait)

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
            raise _failure(response, missing)
        return _parsed(response, model)

    # -- query ---------------------------------------------------------------------------
    def _search(self, text: str, top_n: int | None, filters: dict[str, Any] | None) -> Flow[Answer]:
        body = {"query": text, "top_n": top_n, "filters": filters, "explain": True}
        raw = yield from self._call("POST", "/v1/search", _RAW, json=body)
        return Answer(
            query=raw.get("query", text),
            variants=raw.get("variants") or [],
            results=[_result(item) for item in raw.get("results", [])],
            warnings=raw.get("warnings") or [],
            took_ms=float(raw.get("took_ms", 0.0)),
        )

    def _similar(
        self, text: str, top_n: int, filters: dict[str, Any] | None
    ) -> Flow[list[SearchResult]]:
        body = {"text": text, "top_n": top_n, "filters": filters}
        raw = yield from self._call("POST", "/v1/search/similar", _RAW, json=body)
        return [_result(item) for item in raw.get("results", [])]

    def search(
        self, text: str, *, top_n: int | None = None, filters: dict[str, Any] | None = None
    ) -> Answer:
        """The whole answer to ``text``: the variants searched, the results best first."""
        return self._run(self._search(text, top_n, filters))

    async def asearch(
        self, text: str, *, top_n: int | None = None, filters: dict[str, Any] | None = None
    ) -> Answer:
        return await self._arun(self._search(text, top_n, filters))

    def query(
        self, text: str, *, top_n: int | None = None, filters: dict[str, Any] | None = None
    ) -> list[SearchResult]:
        """The chunks that best answer ``text``, best first."""
        return self.search(text, top_n=top_n, filters=filters).results

    async def aquery(
        self, text: str, *, top_n: int | None = None, filters: dict[str, Any] | None = None
    ) -> list[SearchResult]:
        return (await self.asearch(text, top_n=top_n, filters=filters)).results

    def similar(
        self, text: str, *, top_n: int = 5, filters: dict[str, Any] | None = None
    ) -> list[SearchResult]:
        """The chunks most similar to ``text``: no query rewrite, no reranking."""
        return self._run(self._similar(text, top_n, filters))

    async def asimilar(
        self, text: str, *, top_n: int = 5, filters: dict[str, Any] | None = None
    ) -> list[SearchResult]:
        return await self._arun(self._similar(text, top_n, filters))

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
        return self._run(self._call("GET", "/v1/jobs", _JOBS))

    async def ajobs(self) -> list[Job]:
        return await self._arun(self._call("GET", "/v1/jobs", _JOBS))

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
        accepted = yield from self._call(method, path, _RAW, **kwargs)
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
        urls: list[str] = []
        paths: list[Path] = []
        local = IngestReport()
        for given in inputs:
            text = str(given)
            if isinstance(given, str) and _is_url(text):
                urls.append(text)
                continue
            path = Path(given).expanduser()
            if path.is_symlink():
                local.record_failed(
                    FailedDocument(uri=text, error=f"{text}: symlinks are not followed")
                )
            elif path.is_file():
                paths.append(path)
            elif path.is_dir():
                paths.extend(_walk(path))
            else:
                error = f"{text}: no such file or folder"
                local.record_failed(FailedDocument(uri=text, error=error))
        reports: list[IngestReport] = []
        done = IngestReport()

        def tracked(report: IngestReport) -> None:
            if progress is not None:
                progress(IngestReport.combined([done, report, local]))

        for batch in _chunks(urls, BATCH_URLS):
            job = yield from self._submit_urls(batch, source)
            report = (yield from self._wait(job, tracked if progress else None)).report()
            reports.append(report)
            done = IngestReport.combined(reports)
        batches = list(_file_batches(paths))
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
            reports.append(_relabelled(report, {n: str(p.resolve()) for n, p in uploads}))
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
        for batch in _chunks(urls, BATCH_URLS):
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
        for batch in _chunks(records, BATCH_RECORDS):
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
            page = yield from self._call("GET", "/v1/documents", _RAW, params=params)
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

    def remove_document(self, document_id: str) -> None:
        """Remove a document and everything derived from it."""
        path = self._document_path(document_id)
        self._run(self._call("DELETE", path, _RAW, missing=DocumentNotFoundError))

    async def aremove_document(self, document_id: str) -> None:
        path = self._document_path(document_id)
        await self._arun(self._call("DELETE", path, _RAW, missing=DocumentNotFoundError))

    def stats(self) -> Stats:
        """Documents, chunks and matching texts per source in the key's tenant."""
        return self._run(self._call("GET", "/v1/stats", Stats))

    async def astats(self) -> Stats:
        return await self._arun(self._call("GET", "/v1/stats", Stats))

    # -- housekeeping --------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    async def aclose(self) -> None:
        if self._ahttp is not None:
            await self._ahttp.aclose()
            self._ahttp = None
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
_JOBS: TypeAdapter[list[Job]] = TypeAdapter(list[Job])


def _result(item: dict[str, Any]) -> SearchResult:
    """A result of the tool result as the ``SearchResult`` the embedded query returns
    (its explanation is its signals; fields added to both later carry over)."""
    data = {k: v for k, v in item.items() if k not in ("rank", "explanation")}
    data["signals"] = item.get("explanation") or {}
    return SearchResult.model_validate(data)


def _relabelled(report: IngestReport, paths: dict[str, str]) -> IngestReport:
    """The report with each uploaded file named by the path it was read from, as an
    embedded ingest names it (the server knows only the file name)."""
    for outcome in report.outcomes:
        outcome.input = paths.get(outcome.input, outcome.input)
    for failure in report.failed:
        failure.uri = paths.get(failure.uri, failure.uri)
    for skipped in report.duplicates:
        skipped.uri = paths.get(skipped.uri, skipped.uri)
    return report


def _file_batches(
    paths: list[Path],
) -> Iterator[tuple[list[tuple[str, Path]], list[FailedDocument]]]:
    """Files grouped into uploads of at most ``BATCH_FILES`` files and ``BATCH_BYTES``
    (a larger file goes alone). The server names an upload by its file name, so a second
    file of the same name in one ingest would replace the first: it fails alone instead."""
    names: dict[str, Path] = {}
    batch: list[tuple[str, Path]] = []
    size = 0
    for path in paths:
        failed: list[FailedDocument] = []
        name = path.name
        if name in names:
            error = (
                f"{path}: another file of this ingest is also named '{name}' ({names[name]}); "
                "the server names an upload by its file name: ingest it on its own or rename it"
            )
            yield [], [FailedDocument(uri=str(path), error=error)]
            continue
        names[name] = path
        try:
            length = path.stat().st_size
        except OSError as exc:
            failed.append(FailedDocument(uri=str(path), error=f"{path}: {exc.strerror}"))
            yield [], failed
            continue
        if batch and (len(batch) >= BATCH_FILES or size + length > BATCH_BYTES):
            yield batch, []
            batch, size = [], 0
        batch.append((name, path))
        size += length
    if batch:
        yield batch, []
