"""Chains (admin keys): the six chains of each source with their YAML and prompts, the
prompt editor with a live preview on a chosen chunk (and the LLM's answer when one is
configured), saving, and re-indexing the source as a job that says what it cost.

A prompt file belongs to the whole knowledge base (every tenant's documents are indexed
with it); a re-index started here re-indexes the signed-in tenant's documents.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse

from flexmatch import (
    DEFAULT_TENANT,
    DocumentNotFoundError,
    FlexMatchError,
    MatchingText,
    answer_result,
)
from flexmatch.adapters.http.console import drafts
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
)
from flexmatch.adapters.http.errors import ApiError, error_response, status_for
from flexmatch.adapters.http.jobs import write_item
from flexmatch.adapters.http.routes.search import check_text
from flexmatch.adapters.http.state import ServiceState

router = console_router()

CHOOSER_LIMIT = 200  # documents offered in the chunk chooser (any id can be typed)


def _source(state: ServiceState, name: str) -> str:
    sources = state.kb.config.sources
    if not name:
        return state.kb.config.default_source
    if name not in sources:
        raise ApiError(404, "not_found", f"no source '{name}' (sources: {', '.join(sources)})")
    return name


def _kind(kind: str) -> str:
    if kind not in drafts.KINDS:
        raise ApiError(404, "not_found", f"no chain kind '{kind}'")
    return kind


def _prompt_of(state: ServiceState, source: str, kind: str) -> tuple[str, str]:
    """The name and current text of the prompt the configured chain uses."""
    view = drafts.catalog(state.kb).view(source, kind)
    if view.prompt_name is None or view.prompt_text is None:
        what = drafts.KIND_LABELS[kind]
        raise ApiError(404, "not_found", f"the {what} chain '{view.configured}' has no prompt")
    return view.prompt_name, view.prompt_text


def _text(value: str) -> str:
    """A textarea's text with the browser's CRLF line breaks made plain again."""
    return value.replace("\r\n", "\n").replace("\r", "\n")


@router.get("/chains")
async def chains_page(
    request: Request, user: User, state: State, source: str = "", notice: str = ""
) -> Response:
    need(user, "admin")
    chosen = _source(state, source)
    context = {
        "sources": list(state.kb.config.sources),
        "source": chosen,
        "views": drafts.catalog(state.kb).views[chosen],
        "llm": state.kb.config.models.llm,
        "notice": "The prompt was saved." if notice == "saved" else "",
        "chunk_kinds": drafts.CHUNK_PROMPTS,
        "query_kinds": drafts.QUERY_PROMPTS,
    }
    return render(request, "chains.html", context)


@router.get("/chains/edit")
async def edit_page(
    request: Request,
    user: User,
    state: State,
    source: str = "",
    kind: str = "matching_text",
    document: str = "",
    chunk: int = 0,
    query: str = "",
) -> Response:
    """The prompt editor: the template, a chunk (or query) to preview it on, the preview."""
    need(user, "admin")
    return _editor(
        request, state, user, _source(state, source), _kind(kind), document, chunk, query
    )


def _editor(
    request: Request,
    state: ServiceState,
    user: ConsoleUser,
    source: str,
    kind: str,
    document: str,
    chunk: int,
    query: str,
    text: str | None = None,
    error: str | None = None,
    status: int = 200,
) -> Response:
    name, current = _prompt_of(state, source, kind)
    choices = []
    if kind in drafts.CHUNK_PROMPTS:
        records = [
            r
            for r in state.kb.list_documents(
                source=source, tenant=user.tenant, principal=user.principal.reader
            )
            if r.status == "complete"
        ]
        choices = records[:CHOOSER_LIMIT]
        asked = [r for r in records[CHOOSER_LIMIT:] if r.id == document]
        choices = asked + choices  # a document named in the address is always offered
    context = {
        "source": source,
        "kind": kind,
        "kind_label": drafts.KIND_LABELS[kind],
        "name": name,
        "text": current if text is None else text,
        "users": drafts.catalog(state.kb).users(name),
        "documents": choices,
        "document": document or (choices[0].id if choices else ""),
        "chunk": max(0, chunk),
        "query": query,
        "on_chunk": kind in drafts.CHUNK_PROMPTS,
        "on_query": kind in drafts.QUERY_PROMPTS,
        "llm": state.kb.config.models.llm,
        "error": error,
    }
    return render(request, "prompt_edit.html", context, status=status)


async def _preview_input(
    state: ServiceState, user: ConsoleUser, form: Any, kind: str
) -> dict[str, Any]:
    """What the preview renders on: a stored chunk, or a sample query."""
    if kind in drafts.CHUNK_PROMPTS:
        document_id = text_field(form, "document").strip()
        if not document_id:
            raise ApiError(422, "no_chunk", "choose a document to preview the prompt on")
        try:
            detail = state.kb.get_document(
                document_id, tenant=user.tenant, principal=user.principal.reader
            )
        except DocumentNotFoundError:
            raise ApiError(404, "not_found", f"no document '{document_id}'") from None
        try:
            index = int(text_field(form, "chunk", "0") or 0)
        except ValueError:
            raise ApiError(422, "bad_chunk", "the chunk number is not a number") from None
        chosen = [c for c in detail.chunks if c.index == index]
        if not chosen:
            numbers = [c.index for c in detail.chunks]
            have = f"chunks {min(numbers)} to {max(numbers)}" if numbers else "no stored chunks"
            raise ApiError(422, "bad_chunk", f"the document has {have}")
        section, doc = drafts.chunk_input(state.kb, detail, chosen[0], user.tenant)
        return {"section": section, "document": doc}
    if kind in drafts.QUERY_PROMPTS:
        query = text_field(form, "query").strip() or "What does this knowledge base cover?"
        return {"query": check_text(state, query)}
    raise ApiError(422, "no_preview", "previews are for chunk, query and formatter prompts")


def _json_failure(exc: Exception) -> JSONResponse:
    if isinstance(exc, ApiError):
        return error_response(exc.status, exc.code, exc.message)
    assert isinstance(exc, FlexMatchError)
    status, code = status_for(exc)
    # a template the user is writing fails to load or render: their input, so a 422
    message = drafts.client_message(str(exc))
    return error_response(422 if status == 500 else status, code, message)


@router.post("/api/chains/preview")
async def preview(request: Request, user: User, state: State) -> Response:
    """The edited prompt rendered on the chosen chunk (or query), as the chain would send
    it; nothing is saved and no LLM is called."""
    form = await posted_form(request, user, "admin")
    try:
        source = _source(state, text_field(form, "source"))
        kind = _kind(text_field(form, "kind"))
        name, _ = _prompt_of(state, source, kind)
        template = _text(text_field(form, "template"))
        given = await _preview_input(state, user, form, kind)
        if kind == "formatter":  # the facts block of a real search
            answer = await state.kb.asearch(
                given["query"], tenant=user.tenant, principal=user.principal.reader
            )
            with drafts.draft(state.kb, (name, template)) as edited:
                chain = drafts.chain_of(edited, source, kind)
                text = await drafts.format_result(chain, answer_result(answer))
        else:  # building the draft's chains compiles templates: not on the event loop
            text = await asyncio.to_thread(
                drafts.preview_prompt, state.kb, source, kind, name, template, given
            )
    except (ApiError, FlexMatchError) as exc:
        return _json_failure(exc)
    return JSONResponse({"prompt": text, "characters": len(text), "tokens": len(text) // 4})


def _output(value: Any) -> Any:
    """The chain's answer as text: questions (the chunk text, indexed too, left out),
    a qualifying text, or query variants."""
    if isinstance(value, list):
        return [
            v.text if isinstance(v, MatchingText) else str(v)
            for v in value
            if not (isinstance(v, MatchingText) and v.kind == "content")
        ]
    return str(value)


@router.post("/api/chains/run")
async def run_llm(request: Request, user: User, state: State) -> Response:
    """What the configured LLM answers to the edited prompt for the chosen chunk (or
    query), parsed as the chain parses it, with what the call cost."""
    form = await posted_form(request, user, "admin")
    try:
        if not state.kb.config.models.llm:
            raise ApiError(422, "no_llm", "no LLM is configured (models.llm)")
        source = _source(state, text_field(form, "source"))
        kind = _kind(text_field(form, "kind"))
        if kind not in ("matching_text", "qualifying_text", "query_transform"):
            raise ApiError(422, "no_llm_preview", "this chain's output needs no LLM preview")
        name, _ = _prompt_of(state, source, kind)
        given = await _preview_input(state, user, form, kind)
        with drafts.draft(state.kb, (name, _text(text_field(form, "template"))), llm=True) as kb:
            chain = drafts.chain_of(kb, source, kind)
            if "section" in given:
                output = await drafts.run_on_chunk(chain, given["section"], given["document"])
            else:
                output = await drafts.run_on_query(chain, given["query"])
            usage = kb.llm.usage if kb.llm is not None else None
    except (ApiError, FlexMatchError) as exc:
        return _json_failure(exc)
    return JSONResponse(
        {
            "output": _output(output),
            "model": state.kb.config.models.llm,
            "usage": usage.model_dump() if usage is not None else None,
        }
    )


@router.post("/chains/prompt")
async def save(request: Request, user: User, state: State) -> Response:
    """Save the prompt (after checking that every chain using it still loads), then go
    to the re-index page with its cost."""
    form = await posted_form(request, user, "admin")
    if user.tenant != DEFAULT_TENANT:  # a prompt file indexes every tenant's documents
        raise ApiError(
            403,
            "forbidden",
            "prompt files belong to the whole knowledge base: only an admin key of the "
            f"'{DEFAULT_TENANT}' tenant (the operator's) may save them; this key may preview",
        )
    source = _source(state, text_field(form, "source"))
    kind = _kind(text_field(form, "kind"))
    template = _text(text_field(form, "template"))
    name, _ = _prompt_of(state, source, kind)
    try:
        with drafts.draft(state.kb, (name, template)) as edited:  # every user of it loads
            for each in state.kb.config.sources:
                edited.source_chains(each)
            edited.query_plan()  # every source's query transform, reranker, formatter
    except FlexMatchError as exc:
        document = text_field(form, "document")
        message = drafts.client_message(str(exc))
        return _editor(request, state, user, source, kind, document, 0, "", template, message, 422)
    drafts.save_prompt(state.kb, name, template)
    query = urllib.parse.urlencode({"source": source, "notice": "saved"})
    return redirect(f"{PATH}/chains/reindex?{query}")


@router.get("/chains/reindex")
async def reindex_page(
    request: Request, user: User, state: State, source: str = "", notice: str = ""
) -> Response:
    """Which of the tenant's documents the current chains would index differently, and
    what re-indexing them would cost (nothing is spent to find out)."""
    need(user, "admin")
    chosen = _source(state, source)
    plan = await state.kb.areindex_plan(source=chosen, tenant=user.tenant)
    context = {
        "source": chosen,
        "plan": plan,
        "llm": state.kb.config.models.llm,
        "notice": "The prompt was saved." if notice == "saved" else "",
    }
    return render(request, "reindex.html", context)


@router.post("/chains/reindex")
async def reindex(request: Request, user: User, state: State) -> Response:
    """Re-index the source's changed documents as a job (it reports what it cost)."""
    form = await posted_form(request, user, "admin")
    source = _source(state, text_field(form, "source"))
    kb = state.kb

    async def write(tenant: str, progress: Any) -> Any:
        return await kb.areindex(source=source, tenant=tenant, progress=progress)

    item = write_item(f"re-index source {source}", write)
    job = await state.jobs.submit(user.tenant, "reindex", [item], source=source, total=0)
    return redirect(f"{PATH}/jobs/{job.id}")
