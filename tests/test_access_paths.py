"""One property, every path: random principals (users, groups, admins) against random
documents' access lists, through the Python API, the HTTP API (a real server), the remote
``Client``, the MCP server's tools, the agent tool and the framework adapters. Whatever
the path, a principal never reads a document it may not read (nor its outline, nor any
part of it, nor a grep hit or count from it), never replaces or removes one, and is
answered for a hidden id exactly as for a missing one (a write, which must succeed for a
new id, is refused in words that are the same for every hidden document).
Feedback likewise: a principal marks only chunks it may read, and a hidden chunk is
answered exactly as a missing one.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexmatch import (
    ADMIN,
    Access,
    Client,
    DocumentNotFoundError,
    KnowledgeBase,
    Principal,
)
from flexmatch.access import principal_headers
from flexmatch.adapters.agent import handle_tool_call
from flexmatch.adapters.mcp import build_server
from flexmatch.service import KeyIdentity, KeyStore
from flexmatch.testing import HashEmbedder
from tests.adapters.http.harness import Api, running_api
from tests.test_access import accesses, may_read, principals
from tests.test_write_access import refused, said

QUERY = "orchard memo"
PATTERN = "Orchard memo"  # in every memo's text: what grep finds
MISSING = "memo-missing"
KEPT = ("kept",)
Who = Principal | None  # None: an admin


def memo(index: int, text: str | None = None) -> dict[str, Any]:
    return {
        "fact_id": f"memo-{index}",
        "subject": f"Orchard memo {index}",
        "text": text or f"Orchard memo number {index}, on the topic of team {index * 7 + 3}.",
    }


@dataclass
class Seen:
    """What one path answered, with the id it was asked about taken out."""

    read: tuple[Any, ...]  # ("found",) or the not-found answer
    write: tuple[Any, ...]  # (outcome,) for a write it made, or the refusal
    removed: tuple[Any, ...] | None = None  # the not-found answer (hidden and missing only)


class Route:
    """One way in: read, write (a record of the ``facts`` source), remove and search."""

    name = ""
    removes = False

    def __init__(self, kb: KnowledgeBase, api: Api, tenant: str, tokens: dict[str, str]):
        self.kb, self.api, self.tenant, self.tokens = kb, api, tenant, tokens

    def read(self, who: Who, document_id: str) -> tuple[Any, ...]:
        raise NotImplementedError

    def write(self, who: Who, record: dict[str, Any]) -> tuple[Any, ...]:
        raise NotImplementedError

    def remove(self, who: Who, document_id: str) -> tuple[Any, ...]:
        raise NotImplementedError

    def search(self, who: Who) -> set[str]:
        raise NotImplementedError

    def opens(self, who: Who, document_id: str) -> tuple[tuple[Any, ...], ...]:
        """The answers of its outline and its read of a document."""
        raise NotImplementedError

    def grep(self, who: Who) -> tuple[set[str], int]:
        """The documents grep finds ``PATTERN`` in, and how many it says it found them in."""
        raise NotImplementedError

    def feedback(self, who: Who, chunk_id: str) -> tuple[Any, ...]:
        """``KEPT``, or the answer for a chunk that is not there (its id taken out)."""
        raise NotImplementedError


def _write_answer(status: str, error: str | None, document_id: str) -> tuple[Any, ...]:
    return (status,) if status != "failed" else (status, refused(error, document_id))


class Python(Route):
    name, removes = "python", True

    def read(self, who: Who, document_id: str) -> tuple[Any, ...]:
        try:
            self.kb.get_document(document_id, tenant=self.tenant, principal=who)
        except DocumentNotFoundError as exc:
            return ("missing", said(str(exc), document_id))
        return ("found",)

    def write(self, who: Who, record: dict[str, Any]) -> tuple[Any, ...]:
        report = self.kb.add_records([record], source="facts", tenant=self.tenant, principal=who)
        outcome = report.outcome("record")
        return _write_answer(outcome.outcome, outcome.error, record["fact_id"])

    def remove(self, who: Who, document_id: str) -> tuple[Any, ...]:
        try:
            self.kb.remove_document(document_id, tenant=self.tenant, principal=who)
        except DocumentNotFoundError as exc:
            return ("missing", said(str(exc), document_id))
        return ("removed",)

    def search(self, who: Who) -> set[str]:
        found = self.kb.query(QUERY, top_n=50, tenant=self.tenant, principal=who)
        return {r.document_id for r in found}

    def opens(self, who: Who, document_id: str) -> tuple[tuple[Any, ...], ...]:
        answers = []
        for call in (self.kb.outline, self.kb.read):
            try:
                call(document_id, tenant=self.tenant, principal=who)
            except DocumentNotFoundError as exc:
                answers.append(("missing", said(str(exc), document_id)))
            else:
                answers.append(("found",))
        return tuple(answers)

    def grep(self, who: Who) -> tuple[set[str], int]:
        found = self.kb.grep(PATTERN, limit=200, tenant=self.tenant, principal=who)
        return {h.document_id for h in found.hits}, found.documents

    def feedback(self, who: Who, chunk_id: str) -> tuple[Any, ...]:
        try:
            self.kb.add_feedback(QUERY, chunk_id, tenant=self.tenant, principal=who)
        except DocumentNotFoundError as exc:
            return ("missing", said(str(exc), chunk_id))
        return KEPT


class Http(Route):
    """A real server: an admin key for the admin, else a service key naming the user."""

    name, removes = "http", True

    def headers(self, who: Who) -> dict[str, str]:
        token = self.tokens["admin" if who is None else "service"]
        return {"Authorization": f"Bearer {token}", **principal_headers(who)}

    def read(self, who: Who, document_id: str) -> tuple[Any, ...]:
        response = self.api.client.get(f"/v1/documents/{document_id}", headers=self.headers(who))
        if response.status_code == 200:
            return ("found",)
        return (response.status_code, said(response.text, document_id))

    def write(self, who: Who, record: dict[str, Any]) -> tuple[Any, ...]:
        body = {"records": [record], "source": "facts"}
        response = self.api.client.post("/v1/records", json=body, headers=self.headers(who))
        assert response.status_code == 202, response.text
        url = response.json()["url"]
        deadline = time.monotonic() + 60
        while (job := self.api.client.get(url, headers=self.headers(who)).json())["status"] in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline, job
            time.sleep(0.02)
        outcome = job["documents"][0]
        return _write_answer(outcome["outcome"], outcome.get("error"), record["fact_id"])

    def remove(self, who: Who, document_id: str) -> tuple[Any, ...]:
        response = self.api.client.delete(f"/v1/documents/{document_id}", headers=self.headers(who))
        if response.status_code == 200:
            return ("removed",)
        return (response.status_code, said(response.text, document_id))

    def search(self, who: Who) -> set[str]:
        body = {"query": QUERY, "top_n": 20}
        response = self.api.client.post("/v1/search", json=body, headers=self.headers(who))
        assert response.status_code == 200, response.text
        return {r["document_id"] for r in response.json()["results"]}

    def opens(self, who: Who, document_id: str) -> tuple[tuple[Any, ...], ...]:
        path, headers = f"/v1/documents/{document_id}", self.headers(who)
        answers = (
            self.api.client.get(f"{path}/outline", headers=headers),
            self.api.client.post(f"{path}/read", json={}, headers=headers),
        )
        return tuple(
            ("found",) if r.status_code == 200 else (r.status_code, said(r.text, document_id))
            for r in answers
        )

    def grep(self, who: Who) -> tuple[set[str], int]:
        body = {"pattern": PATTERN, "limit": 200}
        response = self.api.client.post("/v1/grep", json=body, headers=self.headers(who))
        assert response.status_code == 200, response.text
        found = response.json()
        return {h["document_id"] for h in found["hits"]}, found["documents"]

    def feedback(self, who: Who, chunk_id: str) -> tuple[Any, ...]:
        body = {"query": QUERY, "chunk_id": chunk_id, "helpful": True}
        response = self.api.client.post("/v1/feedback", json=body, headers=self.headers(who))
        if response.status_code == 200:
            return KEPT
        return (response.status_code, said(response.text, chunk_id))


class Remote(Http):
    """``flexmatch.Client`` with ``principal=``, against the same server."""

    name = "client"

    def client(self, who: Who) -> Client:
        token = self.tokens["admin" if who is None else "service"]
        url = str(self.api.client.base_url)
        return Client(url, token, principal=who, poll_interval=0.02)

    def read(self, who: Who, document_id: str) -> tuple[Any, ...]:
        with self.client(who) as client:
            try:
                client.get_document(document_id)
            except DocumentNotFoundError as exc:
                return ("missing", said(str(exc), document_id))
        return ("found",)

    def write(self, who: Who, record: dict[str, Any]) -> tuple[Any, ...]:
        with self.client(who) as client:
            report = client.add_records([record], source="facts")
        outcome = report.outcomes[0]
        return _write_answer(outcome.outcome, outcome.error, record["fact_id"])

    def remove(self, who: Who, document_id: str) -> tuple[Any, ...]:
        with self.client(who) as client:
            try:
                client.remove_document(document_id)
            except DocumentNotFoundError as exc:
                return ("missing", said(str(exc), document_id))
        return ("removed",)

    def search(self, who: Who) -> set[str]:
        with self.client(who) as client:
            return {r.document_id for r in client.query(QUERY, top_n=20)}

    def opens(self, who: Who, document_id: str) -> tuple[tuple[Any, ...], ...]:
        answers = []
        with self.client(who) as client:
            for call in (client.outline, client.read):
                try:
                    call(document_id)
                except DocumentNotFoundError as exc:
                    answers.append(("missing", said(str(exc), document_id)))
                else:
                    answers.append(("found",))
        return tuple(answers)

    def grep(self, who: Who) -> tuple[set[str], int]:
        with self.client(who) as client:
            found = client.grep(PATTERN, limit=200)
        return {h.document_id for h in found.hits}, found.documents

    def feedback(self, who: Who, chunk_id: str) -> tuple[Any, ...]:
        with self.client(who) as client:
            try:
                client.add_feedback(QUERY, chunk_id)
            except DocumentNotFoundError as exc:
                return ("missing", said(str(exc), chunk_id))
        return KEPT


class Agent(Route):
    name = "agent"

    def call(self, who: Who, tool: str, arguments: dict[str, Any]) -> Any:
        scope = ADMIN if who is None else who
        raw = handle_tool_call(self.kb, tool, arguments, self.tenant, principal=scope)
        return json.loads(asyncio.run(raw))

    def read(self, who: Who, document_id: str) -> tuple[Any, ...]:
        answer = self.call(who, "get_document", {"document_id": document_id})
        return (
            ("found",) if "error" not in answer else ("missing", said(answer["error"], document_id))
        )

    def write(self, who: Who, record: dict[str, Any]) -> tuple[Any, ...]:
        answer = self.call(who, "add_record", {"record": record, "source": "facts"})
        return _write_answer(answer["status"], answer["detail"], record["fact_id"])

    def search(self, who: Who) -> set[str]:
        answer = self.call(who, "search_knowledge", {"query": QUERY, "top_n": 20})
        return {r["document_id"] for r in answer["results"]}

    def opens(self, who: Who, document_id: str) -> tuple[tuple[Any, ...], ...]:
        answers = [
            self.call(who, tool, {"document_id": document_id})
            for tool in ("outline_document", "read_document")
        ]
        return tuple(
            ("found",) if "error" not in a else ("missing", said(a["error"], document_id))
            for a in answers
        )

    def grep(self, who: Who) -> tuple[set[str], int]:
        found = self.call(who, "grep_knowledge", {"pattern": PATTERN, "limit": 200})
        return {h["document_id"] for h in found["hits"]}, found["documents"]

    def feedback(self, who: Who, chunk_id: str) -> tuple[Any, ...]:
        answer = self.call(who, "give_feedback", {"query": QUERY, "chunk_ids": [chunk_id]})
        (kept,) = answer["feedback"]
        return KEPT if "error" not in kept else ("missing", said(kept["error"], chunk_id))


class Mcp(Route):
    """The MCP server's tools, in memory, served for ``who`` (``flexmatch mcp --as``)."""

    name = "mcp"

    def call(self, who: Who, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        from mcp import Client as McpClient

        async def session() -> tuple[bool, str]:
            server = build_server(self.kb, tenant=self.tenant, principal=who)
            async with McpClient(server) as client:
                result = await client.call_tool(tool, arguments)
            return result.is_error, result.content[0].text  # type: ignore[union-attr]

        return asyncio.run(session())

    def read(self, who: Who, document_id: str) -> tuple[Any, ...]:
        error, text = self.call(who, "get_document", {"document_id": document_id})
        return ("missing", said(text, document_id)) if error else ("found",)

    def write(self, who: Who, record: dict[str, Any]) -> tuple[Any, ...]:
        error, text = self.call(who, "add_record", {"record": record, "source": "facts"})
        if error:
            return ("failed", refused(text, record["fact_id"]))
        return (json.loads(text)["status"],)

    def search(self, who: Who) -> set[str]:
        error, text = self.call(who, "search_knowledge", {"query": QUERY, "top_n": 20})
        assert not error, text
        return {r["document_id"] for r in json.loads(text)["results"]}

    def opens(self, who: Who, document_id: str) -> tuple[tuple[Any, ...], ...]:
        answers = [
            self.call(who, tool, {"document_id": document_id})
            for tool in ("outline_document", "read_document")
        ]
        return tuple(
            ("missing", said(text, document_id)) if error else ("found",) for error, text in answers
        )

    def grep(self, who: Who) -> tuple[set[str], int]:
        error, text = self.call(who, "grep_knowledge", {"pattern": PATTERN, "limit": 200})
        assert not error, text
        found = json.loads(text)
        return {h["document_id"] for h in found["hits"]}, found["documents"]

    def feedback(self, who: Who, chunk_id: str) -> tuple[Any, ...]:
        arguments = {"query": QUERY, "chunk_ids": [chunk_id]}
        error, text = self.call(who, "give_feedback", arguments)
        assert not error, text
        (kept,) = json.loads(text)["feedback"]
        return KEPT if "error" not in kept else ("missing", said(kept["error"], chunk_id))


PATHS: list[type[Route]] = [Python, Http, Remote, Agent, Mcp]


def framework_searches(kb: KnowledgeBase, tenant: str) -> list[Callable[[Who], set[str]]]:
    """Each installed framework adapter's search, for a principal (None: ``ADMIN``)."""
    found: list[Callable[[Who], set[str]]] = []
    try:
        from flexmatch.adapters.frameworks import langchain
    except ImportError:
        pass
    else:

        def with_langchain(who: Who) -> set[str]:
            retriever = langchain.FlexMatchRetriever(
                kb=kb, tenant=tenant, top_n=20, principal=ADMIN if who is None else who
            )
            return {d.metadata["document_id"] for d in retriever.invoke(QUERY)}

        found.append(with_langchain)
    try:
        from flexmatch.adapters.frameworks import llamaindex
    except ImportError:
        pass
    else:

        def with_llamaindex(who: Who) -> set[str]:
            retriever = llamaindex.FlexMatchRetriever(
                kb, tenant=tenant, top_n=20, principal=ADMIN if who is None else who
            )
            return {n.node.metadata["document_id"] for n in retriever.retrieve(QUERY)}

        found.append(with_llamaindex)
    try:
        from flexmatch.adapters.frameworks import openai_agents
    except ImportError:
        pass
    else:

        def with_openai_agents(who: Who) -> set[str]:
            tool = openai_agents.search_tool(
                kb, tenant=tenant, top_n=20, principal=ADMIN if who is None else who
            )
            from agents.tool_context import ToolContext

            text = json.dumps({"query": QUERY})
            context = ToolContext(
                context=None, tool_name=tool.name, tool_call_id="c1", tool_arguments=text
            )
            raw = asyncio.run(tool.on_invoke_tool(context, text))
            return {r["document_id"] for r in json.loads(raw)["results"]}

        found.append(with_openai_agents)
    return found


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    folder = tmp_path_factory.mktemp("paths") / "kb"
    with running_api(folder, HashEmbedder()) as running:  # type: ignore[arg-type]
        yield running


def keys(store: KeyStore, tenant: str) -> dict[str, str]:
    return {
        "admin": store.create(tenant, "admin", "admin")[1],
        "service": store.create(tenant, "read,write,feedback", "app", KeyIdentity(service=True))[1],
    }


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(accesses, min_size=1, max_size=3),
    st.lists(st.none() | principals, min_size=1, max_size=2),
)
def test_every_path_reads_and_writes_only_what_its_principal_may(
    api: Api, documents: list[Access | None], askers: list[Who]
) -> None:
    kb, tenant = api.kb, uuid.uuid4().hex[:12]
    records = [
        {**memo(i), **({"access": a.model_dump()} if a else {})} for i, a in enumerate(documents)
    ]
    assert not kb.add_records(records, source="facts", tenant=tenant).failed
    access = {f"memo-{i}": a for i, a in enumerate(documents)}
    paths = [path(kb, api, tenant, keys(api.keys, tenant)) for path in PATHS]
    searches = {p.name: p.search for p in paths}
    searches |= {f.__name__: f for f in framework_searches(kb, tenant)}

    def state(document_id: str) -> tuple[Any, ...]:
        record = kb.registry.get(tenant, document_id)
        assert record is not None
        copy = kb.stored_copy(document_id, tenant=tenant)
        return record.version, record.access, copy.text if copy else None

    for who in askers:
        readable = {d for d, a in access.items() if may_read(a, who)}
        hidden = set(access) - readable
        before = {d: state(d) for d in hidden}
        for name, search in searches.items():
            assert search(who) == readable, (name, who)  # nothing hidden, and the top-K full
        refusals: set[tuple[Any, ...]] = set()
        for path in paths:
            # grep: no hit, and no count, from a document the principal may not read
            assert path.grep(who) == (readable, len(readable)), (path.name, who)
            unknown = path.opens(who, MISSING)
            assert all(answer[0] != "found" for answer in unknown), (path.name, unknown)
            for document_id in access:
                opened = path.opens(who, document_id)
                expected = (("found",), ("found",)) if document_id in readable else unknown
                assert opened == expected, (path.name, who, document_id)
            missing = Seen(read=path.read(who, MISSING), write=())
            assert missing.read[0] != "found"
            no_chunk = path.feedback(who, f"{MISSING}#0")
            assert no_chunk != KEPT
            for document_id in access:
                marked = path.feedback(who, f"{document_id}#0")
                expected = KEPT if document_id in readable else no_chunk
                assert marked == expected, (path.name, who, document_id)
            for document_id in access:
                index = int(document_id.removeprefix("memo-"))
                seen = Seen(
                    read=path.read(who, document_id),
                    # the stored text itself: a readable one is unchanged, never "added"
                    write=path.write(who, memo(index)),
                )
                if document_id in readable:
                    assert seen.read == ("found",), (path.name, who, document_id)
                    assert seen.write == ("unchanged",), (path.name, who, document_id)
                    continue
                assert seen.read == missing.read, (path.name, who, document_id)
                assert seen.write[0] == "failed", (path.name, who, document_id, seen.write)
                refusals.add(seen.write[1:])
                forged = path.write(who, memo(index, "Overwritten by someone who may not."))
                assert forged == seen.write, (path.name, who, document_id)  # changed or not
                if path.removes:
                    gone = path.remove(who, document_id)
                    assert gone == path.remove(who, MISSING), (path.name, who, document_id)
        # the same words for every hidden document on every path (the tenant aside)
        assert len({r for r in refusals}) <= 1, refusals
        assert {d: state(d) for d in hidden} == before  # none replaced, none removed
    new = paths[0].write(askers[0], memo(99, "A new id is anyone's to write."))
    assert new == ("added",)
