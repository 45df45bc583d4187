"""Documents: bulk upload, URL import and records (as jobs); list, show, replace, delete;
read them as an agent does (outline, read, grep)."""

from __future__ import annotations

import asyncio
import json
import mimetypes
import urllib.parse
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, File, Form, Query, Request, Response, UploadFile
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import UploadFile as StarletteUploadFile

from flexmatch import (
    Document,
    DocumentDetail,
    DocumentNotFoundError,
    FailedDocument,
    GrepResult,
    JobKind,
    Outline,
    ParseError,
    Principal,
    Reading,
    check_sets_no_access,
    record_id,
)
from flexmatch.adapters.http.auth import Caller, require
from flexmatch.adapters.http.errors import ApiError, not_found, reject_unknown_query
from flexmatch.adapters.http.jobs import Reservation, WorkItem, owner_of
from flexmatch.adapters.http.multipart import UploadRoute
from flexmatch.adapters.http.schemas import (
    AccessRequest,
    Deleted,
    DocumentList,
    GrepBody,
    JobAccepted,
    ReadBody,
    RecordsRequest,
    ReplaceResult,
    UrlImportRequest,
)
from flexmatch.adapters.http.state import ServiceState, get_state
from flexmatch.service import safe_filename

router = APIRouter(
    prefix="/v1",
    tags=["documents"],
    dependencies=[Depends(reject_unknown_query)],
    route_class=UploadRoute,  # a long file name is one file's matter, not the batch's
)
Read = Coroutine[Any, Any, list[Document | FailedDocument]]

Reader = Annotated[Caller, Depends(require("read"))]
Writer = Annotated[Caller, Depends(require("write"))]
Admin = Annotated[Caller, Depends(require("admin"))]
State = Annotated[ServiceState, Depends(get_state)]


# -- helpers ---------------------------------------------------------------------------
def pick_source(state: ServiceState, name: str | None, *, records: bool = False) -> str:
    """The named source (or the default one), checked against the config (a
    ``SourceChoiceError`` is answered with its own status and code)."""
    return state.kb.choose_source(name, records=records)


def parse_metadata(text: str | None) -> dict[str, Any] | None:
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text.removeprefix("\ufeff"))  # a BOM is no error
    except json.JSONDecodeError as exc:
        raise ApiError(422, "invalid_metadata", f"metadata is not valid JSON: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise ApiError(422, "invalid_metadata", "metadata must be a JSON object")
    return value


async def _accepted(
    state: ServiceState,
    response: Response,
    principal: Caller,
    kind: JobKind,
    items: list[WorkItem],
    source: str,
    reservation: Reservation | None = None,
) -> JobAccepted:
    """Start the job as ``principal``: only it (and admin keys) may follow the job, and
    it writes as the key's writer (the knowledge base replaces no document it cannot
    read unless it is an admin key)."""
    job = await state.jobs.submit(
        principal.tenant,
        kind,
        items,
        source,
        reservation=reservation,
        owner=owner_of(principal.key_id, principal.reader),
        writer=principal.writer,
    )
    url = f"/v1/jobs/{job.id}"
    response.headers["Location"] = url
    return JobAccepted(job_id=job.id, status=job.status, total=job.total, url=url)


def refuse_access(principal: Caller, field: str | None) -> None:
    """A request whose ``field`` names an access list is refused at once (403
    ``write_refused``) unless its key writes as an admin: the engine's rule
    (``check_sets_no_access``), applied before the job starts rather than per document."""
    if field is not None:
        check_sets_no_access(principal.writer, field)


def _size(upload: StarletteUploadFile) -> int:
    """The upload's size in bytes (Starlette counts it while parsing the form)."""
    if upload.size is not None:
        return upload.size
    upload.file.seek(0, 2)
    return upload.file.tell()


# -- ingest ----------------------------------------------------------------------------
@router.post("/documents", status_code=202, response_model=JobAccepted)
async def upload_documents(
    principal: Writer,
    state: State,
    response: Response,
    files: Annotated[list[UploadFile], File(description="One or many files (bulk import).")],
    source: Annotated[str | None, Form(description="A source from flexmatch.yaml.")] = None,
    metadata: Annotated[
        str | None, Form(description="A JSON object added to every document's metadata.")
    ] = None,
) -> JobAccepted:
    """Upload files; they are ingested by a background job (poll ``GET /v1/jobs/{id}``)."""
    return await upload_job(principal, state, response, files, source, metadata)


async def upload_job(
    principal: Caller,
    state: ServiceState,
    response: Response,
    files: Sequence[StarletteUploadFile],
    source: str | None = None,
    metadata: str | None = None,
) -> JobAccepted:
    """The job of an upload: the route's, and the console's (a form's own files, which
    FastAPI's ``UploadFile`` only annotates)."""
    name = pick_source(state, source)
    extra = parse_metadata(metadata)
    refuse_access(principal, "metadata.access" if extra and "access" in extra else None)
    tenant = principal.tenant
    jobs = state.jobs
    sizes = [_size(upload) for upload in files]
    # counted before a byte is copied, so concurrent uploads cannot pass the caps (429)
    reservation = jobs.reserve(tenant, sum(sizes))
    items = []
    try:
        # the files wait for their job on disk (the spool), never in memory
        folder = reservation.folder = await asyncio.to_thread(jobs.spool.job_folder)
        for index, (upload, size) in enumerate(zip(files, sizes, strict=True)):
            filename = safe_filename(upload.filename or "upload")
            path = await asyncio.to_thread(jobs.spool.write, folder, index, upload.file)
            await upload.close()

            async def read(
                filename: str = filename, path: Path = path, size: int = size
            ) -> list[Document | FailedDocument]:
                try:
                    data = await asyncio.to_thread(path.read_bytes)
                    await asyncio.to_thread(path.unlink, missing_ok=True)
                finally:
                    jobs.consumed(reservation, size)
                return await state.kb.aread_upload(filename, data, source=name, metadata=extra)

            items.append(WorkItem(label=filename, read=read))
    except OSError as exc:  # the spool's disk is full or gone: say so, never a traceback
        jobs.release(reservation)
        raise ApiError(
            503,
            "spool_unavailable",
            f"the server could not keep the upload on disk for its job ({exc.strerror}); "
            "retry later",
            headers={"Retry-After": str(jobs.retry_after)},
        ) from None
    except BaseException:
        jobs.release(reservation)
        raise
    return await _accepted(state, response, principal, "upload", items, name, reservation)


@router.post("/documents/url", status_code=202, response_model=JobAccepted)
async def import_urls(
    body: UrlImportRequest, principal: Writer, state: State, response: Response
) -> JobAccepted:
    """Import web pages by URL under the web safety rules (private addresses refused)."""
    if len(body.urls) > state.limits.max_urls_per_request:
        raise ApiError(
            422, "too_many_items", f"at most {state.limits.max_urls_per_request} URLs per request"
        )
    name = pick_source(state, body.source)
    items = []
    for url in body.urls:

        def fetch(url: str = url) -> Read:
            return state.kb.afetch_pages([url], source=name)

        items.append(WorkItem(label=url, read=fetch))
    return await _accepted(state, response, principal, "url", items, name)


async def records_body(request: Request) -> RecordsRequest:
    """The request body parsed and checked on a thread: a wide record (100,000 fields is
    ~3 MB of JSON) took the event loop, and every tenant's requests, ~0.5 s to decode."""
    raw = await request.body()

    def parse() -> RecordsRequest:
        try:  # the standard library's decoder: deeper records than pydantic's reach
            data = json.loads(raw)  # a record over the depth cap then fails alone
        except (ValueError, RecursionError) as exc:
            invalid = {"loc": ("body",), "msg": f"Invalid JSON: {exc}", "type": "json_invalid"}
            raise RequestValidationError([invalid]) from None
        try:
            return RecordsRequest.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False, include_context=False)
            for error in errors:
                error["loc"] = ("body", *error["loc"])
            raise RequestValidationError(errors) from None

    return await asyncio.to_thread(parse)


@router.post(
    "/records",
    status_code=202,
    response_model=JobAccepted,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": RecordsRequest.model_json_schema()}},
        }
    },
)
async def add_records(
    body: Annotated[RecordsRequest, Depends(records_body)],
    principal: Writer,
    state: State,
    response: Response,
) -> JobAccepted:
    """Ingest structured records through a records source's template."""
    if len(body.records) > state.limits.max_records_per_request:
        limit = state.limits.max_records_per_request
        raise ApiError(422, "too_many_items", f"at most {limit} records per request")
    declaring = next((i for i, r in enumerate(body.records) if "access" in r), None)
    refuse_access(principal, None if declaring is None else f"records[{declaring}].access")
    name = pick_source(state, body.source, records=True)
    config = state.kb.config.sources[name]
    items = []
    first: dict[str, str] = {}  # id → the record that gave it first (ids are unique)
    for index, record in enumerate(body.records):

        def render(record: dict[str, Any] = record, index: int = index) -> Read:
            return state.kb.aread_records([record], source=name, first=index)

        label = f"record {index}"
        try:
            document_id = record_id(record, None, f"record:{index}", config)
        except ParseError as exc:  # the record fails alone, with its reason
            items.append(WorkItem(label=label, read=_refuse(label, str(exc))))
            continue
        if document_id is not None:
            label += f" ({document_id})"
            if document_id in first:
                error = (
                    f"record:{index}: id '{document_id}' is already used by {first[document_id]} "
                    'in the same request; ids must be unique (1 and "1" are the same id)'
                )
                items.append(WorkItem(label=label, read=_refuse(label, error)))
                continue
            first[document_id] = f"record:{index}"
        items.append(WorkItem(label=label, read=render, document_id=document_id))
    return await _accepted(state, response, principal, "records", items, name)


def _refuse(label: str, error: str) -> Callable[[], Read]:
    """A work item's reader that fails it with ``error`` (the rest of the job goes on)."""

    async def refused() -> list[Document | FailedDocument]:
        return [FailedDocument(uri=label, error=error)]

    return refused


# -- documents -------------------------------------------------------------------------
@router.get("/documents", response_model=DocumentList)
async def list_documents(
    principal: Reader,
    state: State,
    source: Annotated[str | None, Query(description="Only this source.")] = None,
    status: Annotated[
        Literal["pending", "complete", "failed", "removing"] | None,
        Query(description="Only documents in this state."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> DocumentList:
    """The tenant's documents the caller may read, sorted by source and uri, a page at a
    time."""
    records = state.kb.list_documents(
        source=source, tenant=principal.tenant, principal=principal.reader
    )
    if status is not None:
        records = [r for r in records if r.status == status]
    page = records[offset : offset + limit]
    return DocumentList(items=page, total=len(records), limit=limit, offset=offset)


def _detail(
    state: ServiceState, tenant: str, document_id: str, reader: Principal | None = None
) -> DocumentDetail:
    """The document, or a 404 for one that does not exist or ``reader`` may not read (the
    same answer: nobody learns of a document they may not read)."""
    try:
        return state.kb.get_document(document_id, tenant=tenant, principal=reader)
    except DocumentNotFoundError:
        raise not_found("document", document_id) from None


@router.get(
    "/documents/{document_id:path}/original",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}, "description": "The file."}},
)
async def download_original(document_id: str, principal: Reader, state: State) -> Response:
    """The file a document was uploaded as, byte for byte (uploads only)."""
    try:
        original = state.kb.get_original(
            document_id, tenant=principal.tenant, principal=principal.reader
        )
    except DocumentNotFoundError:
        raise not_found("original of document", document_id) from None
    media_type = mimetypes.guess_type(original.filename)[0] or "application/octet-stream"
    quoted = urllib.parse.quote(original.filename)
    return Response(
        original.data,
        media_type=media_type,
        headers={"Content-Disposition": f"attachment; filename*=UTF-8''{quoted}"},
    )


@router.get(
    "/documents/{document_id:path}/outline",
    response_model=Outline,
    response_model_exclude_none=True,
)
async def outline(document_id: str, principal: Reader, state: State) -> Outline:
    """A document's headings in order, each with its location and the chunks under it."""
    try:
        return await state.kb.aoutline(
            document_id, tenant=principal.tenant, principal=principal.reader
        )
    except DocumentNotFoundError:
        raise not_found("document", document_id) from None


@router.post(
    "/documents/{document_id:path}/read",
    response_model=Reading,
    response_model_exclude_none=True,
)
async def read(document_id: str, body: ReadBody, principal: Reader, state: State) -> Reading:
    """Part of a document: a section, pages, lines or a chunk with its neighbours, at
    most ``MAX_READ_CHARS`` characters (``truncated``: read on from ``next_chunk``)."""
    try:
        return await state.kb.aread(
            document_id, **dict(body), tenant=principal.tenant, principal=principal.reader
        )
    except DocumentNotFoundError:
        raise not_found("document", document_id) from None


@router.post("/grep", response_model=GrepResult, response_model_exclude_none=True)
async def grep(body: GrepBody, principal: Reader, state: State) -> GrepResult:
    """The lines of the caller's readable documents that hold a text or match a regex,
    each cited; bounded by ``limit`` and a time budget (``truncated``)."""
    return await state.kb.agrep(**dict(body), tenant=principal.tenant, principal=principal.reader)


@router.get("/documents/{document_id:path}", response_model=DocumentDetail)
async def get_document(document_id: str, principal: Reader, state: State) -> DocumentDetail:
    """A document with its chunks, their matching texts and qualifying texts."""
    return _detail(state, principal.tenant, document_id, principal.reader)


@router.put("/documents/{document_id:path}/access", response_model=DocumentDetail)
async def set_access(
    document_id: str, body: AccessRequest, principal: Admin, state: State
) -> DocumentDetail:
    """Change who may read a document (admin keys): its points are updated in place,
    nothing is re-embedded; ``{"access": null}`` opens it to the whole tenant."""
    async with state.writer.write(principal.tenant):
        try:
            state.kb.set_access(document_id, body.access, tenant=principal.tenant)
        except DocumentNotFoundError:
            raise not_found("document", document_id) from None
    return _detail(state, principal.tenant, document_id)


@router.put("/documents/{document_id:path}", response_model=ReplaceResult)
async def replace_document(
    document_id: str,
    principal: Writer,
    state: State,
    file: Annotated[UploadFile | None, File(description="The new content.")] = None,
    metadata: Annotated[
        str | None, Form(description="A JSON object: the document's new metadata.")
    ] = None,
) -> ReplaceResult:
    """Replace a document's content and/or its metadata, re-indexed atomically: readers see
    the old version until the new one is complete. With metadata alone, the knowledge
    base re-indexes from its stored copy (the LLM cache answers every chain again)."""
    extra = parse_metadata(metadata)
    refuse_access(principal, "metadata.access" if extra and "access" in extra else None)
    if file is None and extra is None:
        raise ApiError(
            422,
            "content_required",
            "send the new content as 'file', new 'metadata' (a JSON object), or both",
        )
    tenant = principal.tenant
    ticket = state.writer.ticket(tenant)  # this PUT's place among the tenant's writes
    filename = "metadata"
    try:
        # the write's own check, as DELETE's: an admin key writes as an admin, naming anyone
        source = _detail(state, tenant, document_id, principal.writer).document.source
        documents = None
        if file is not None:
            filename = safe_filename(file.filename or "upload")
            data = await file.read()
            await file.close()
            documents = await state.kb.aread_upload(  # parsed before its turn, in a worker
                filename, data, source=source, document_id=document_id, metadata=extra
            )
    except BaseException:
        ticket.abandon()
        raise
    await state.warmed()
    async with state.writer.apply(ticket):
        _detail(state, tenant, document_id)  # still there in its turn
        writer = principal.writer
        try:
            if documents is None:
                report = await state.kb.aupdate_metadata(
                    document_id, extra or {}, tenant=tenant, principal=writer
                )
            else:
                report = await state.kb.aingest_documents(
                    documents, tenant=tenant, principal=writer
                )
        except DocumentNotFoundError:
            raise not_found("document", document_id) from None
    outcome = report.outcome(filename, document_id)
    state.metrics.ingested([outcome])
    if outcome.outcome == "failed":
        raise ApiError(422, "ingest_failed", outcome.error or "the new content was not ingested")
    if outcome.outcome == "duplicate":
        raise ApiError(409, "duplicate_content", outcome.error or "the content is a duplicate")
    return ReplaceResult(outcome=outcome, document=_detail(state, tenant, document_id).document)


@router.delete("/documents/{document_id:path}", response_model=Deleted)
async def delete_document(document_id: str, principal: Writer, state: State) -> Deleted:
    """Remove a document and everything derived from it."""
    async with state.writer.write(principal.tenant):
        try:
            state.kb.remove_document(
                document_id, tenant=principal.tenant, principal=principal.writer
            )
        except DocumentNotFoundError:
            raise not_found("document", document_id) from None
    return Deleted(id=document_id)
