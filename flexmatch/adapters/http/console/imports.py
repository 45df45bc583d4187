"""Importing: files (drag and drop, many at once), web pages by URL, and the jobs that
ingest them, followed live.

The imports go through the API's own route functions (``upload_documents``,
``import_urls``), so they become the same background jobs with the same per-document
outcomes; the pages poll ``/console/api/jobs/{id}``, the API's job, as JSON.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from flexmatch.adapters.http.console.sessions import PATH
from flexmatch.adapters.http.console.web import (
    ConsoleUser,
    State,
    User,
    console_router,
    need,
    posted_form,
    redirect,
    render,
    text_field,
    wants_json,
)
from flexmatch.adapters.http.errors import ApiError
from flexmatch.adapters.http.routes import documents as document_routes
from flexmatch.adapters.http.routes import jobs as job_routes
from flexmatch.adapters.http.schemas import UrlImportRequest
from flexmatch.adapters.http.state import ServiceState
from flexmatch.service import safe_filename

router = console_router()


def _source_choices(state: ServiceState, kinds: tuple[str, ...]) -> list[dict[str, str]]:
    config = state.kb.config
    return [
        {"name": name, "type": source.type}
        for name, source in config.sources.items()
        if source.type in kinds
    ]


def _job_links(job_id: str) -> dict[str, str]:
    return {
        "job_id": job_id,
        "url": f"{PATH}/jobs/{job_id}",
        "poll": f"{PATH}/api/jobs/{job_id}",
    }


@router.get("/import")
async def import_page(request: Request, user: User, state: State) -> Response:
    need(user, "write")
    sources = _source_choices(state, ("files", "records", "web"))
    context = {
        "sources": sources,
        "default_source": state.kb.config.default_source,
        "max_bytes": state.kb.config.ingest.max_document_bytes,
        "max_body": state.limits.max_body_bytes,
    }
    return render(request, "import.html", context)


@router.post("/import")
async def import_files(request: Request, user: User, state: State) -> Response:
    """Start an upload job: the API's ``POST /v1/documents`` with this session's key."""
    form = await posted_form(request, user, "write")
    files = [f for f in form.getlist("files") if isinstance(f, UploadFile) and f.filename]
    if not files:
        raise ApiError(422, "no_files", "choose at least one file to import")
    source = text_field(form, "source") or None
    labels = [safe_filename(f.filename or "upload") for f in files]
    accepted = await document_routes.upload_job(user.principal, state, Response(), files, source)
    if wants_json(request):
        return JSONResponse({**_job_links(accepted.job_id), "inputs": labels}, status_code=202)
    return redirect(f"{PATH}/jobs/{accepted.job_id}")


@router.get("/import/url")
async def url_page(request: Request, user: User, state: State) -> Response:
    need(user, "write")
    sources = _source_choices(state, ("files", "records", "web"))
    web = [s["name"] for s in sources if s["type"] == "web"]
    context = {
        "sources": sources,
        "default_source": web[0] if web else state.kb.config.default_source,
        "urls": "",
        "error": None,
        "max_urls": state.limits.max_urls_per_request,
    }
    return render(request, "import_url.html", context)


@router.post("/import/url")
async def import_urls(request: Request, user: User, state: State) -> Response:
    """Start a URL import job: the API's ``POST /v1/documents/url``."""
    form = await posted_form(request, user, "write")
    text = text_field(form, "urls")
    urls = [line.strip() for line in text.splitlines() if line.strip()]
    source = text_field(form, "source") or None
    try:
        if not urls:
            raise ApiError(422, "no_urls", "enter at least one URL, one per line")
        body = UrlImportRequest(urls=urls, source=source)
        accepted = await document_routes.import_urls(body, user.principal, state, Response())
    except (ApiError, ValidationError) as exc:
        message = exc.message if isinstance(exc, ApiError) else "enter at least one URL"
        status = exc.status if isinstance(exc, ApiError) else 422
        sources = _source_choices(state, ("files", "records", "web"))
        context = {
            "sources": sources,
            "default_source": source or state.kb.config.default_source,
            "urls": text,
            "error": message,
            "max_urls": state.limits.max_urls_per_request,
        }
        return render(request, "import_url.html", context, status=status)
    return redirect(f"{PATH}/jobs/{accepted.job_id}")


# -- jobs --------------------------------------------------------------------------------
@router.get("/jobs/{job_id}")
async def job_page(request: Request, job_id: str, user: User, state: State) -> Response:
    """A job's progress and each document's outcome; the page follows it live."""
    need_any(user)
    job = await job_routes.get_job(job_id, user.principal, state)
    return render(request, "job.html", {"job": job, **_job_links(job.id)})


@router.get("/api/jobs/{job_id}")
async def job_json(job_id: str, user: User, state: State) -> Any:
    """The API's ``GET /v1/jobs/{id}``, for the pages' live progress."""
    need_any(user)
    job = await job_routes.get_job(job_id, user.principal, state)
    return JSONResponse(job.model_dump(mode="json"), headers={"Cache-Control": "no-store"})


def need_any(user: ConsoleUser) -> None:
    """Whoever may start a job may follow it (as in the API)."""
    if not (user.can("read") or user.can("write")):
        need(user, "read")
