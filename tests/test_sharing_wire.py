"""The store's socket in one process (quick): what the owner answers on it, to whom, and
with what mode; ``tests/test_sharing.py`` runs the real processes."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from flexmatch import KnowledgeBase
from flexmatch.errors import DepthError, QueryError, StoreError
from flexmatch.sharing import (
    HERE,
    MAX_REQUEST,
    Owner,
    _address,
    _raised,
    _wire_args,
    call,
    socket_path,
)
from flexmatch.testing import HashEmbedder, memory_knowledge_base
from tests.conftest import write_config

HARBOUR = "# Harbour\n\nThe ferry to Gull Island leaves the harbour at nine.\n"
PLANS = "# Plans\n\nThe winter festival plans are secret.\n"


def _ask(path: Path, request: dict[str, Any], *, lines: int | None = None) -> list[dict[str, Any]]:
    """The owner's answer lines: all of them up to the end, else the first ``lines`` (as
    ``call`` reads: a worker forked during the call may hold the socket open after it)."""
    conn = socket.socket(socket.AF_UNIX)
    with _address(path) as address:
        conn.connect(address)
    with conn, conn.makefile("rb") as stream:
        conn.sendall(json.dumps(request).encode() + b"\n")
        if lines is not None:
            return [json.loads(stream.readline()) for _ in range(lines)]
        return [json.loads(line) for line in stream]


def test_the_owner_answers_with_the_callers_principal_and_refuses_other_calls(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "harbour.md").write_text(HARBOUR, encoding="utf-8")
    (docs / "plans.md").write_text(PLANS, encoding="utf-8")
    rules = "    access_rules:\n      'plans.md': {principals: ['user:bob']}\n"
    write_config(tmp_path / "kb", "sources:\n  default:\n" + rules)
    # a folder deep enough that the socket's path passes a socket address's 108 bytes
    store = tmp_path / ("deep-" * 20) / "store"
    store.parent.mkdir()
    with memory_knowledge_base(tmp_path / "kb") as kb:
        kb.ingest([docs])
        owner = Owner(kb, store)
        owner.held(True)
        try:
            path = socket_path(store)
            assert len(os.fsencode(path)) > 108
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
            alice = {"user": "alice", "groups": []}
            listed = _ask(path, {"call": "list_documents", "args": {"principal": alice}})
            uris = [r["uri"] for r in listed[-1]["result"]]
            assert len(uris) == 1 and uris[0].endswith("harbour.md")
            bob = _ask(path, {"call": "list_documents", "args": {"principal": {"user": "bob"}}})
            assert len(bob[-1]["result"]) == 2
            restricted = _ask(path, {"call": "has_restricted_documents", "args": {}})
            assert restricted == [{"result": True}]
            plans = next(u for u in bob[-1]["result"] if u["uri"].endswith("plans.md"))
            opened = {"document_id": plans["id"], "access": None}
            record = _ask(path, {"call": "set_access", "args": opened})[-1]["result"]
            assert record["id"] == plans["id"] and record["access"] is None
            assert _ask(path, {"call": "has_restricted_documents", "args": {}}) == [
                {"result": False}
            ]
            refused = _ask(path, {"call": "drop_everything", "args": {}})
            assert refused == [
                {
                    "error": {
                        "type": "StoreError",
                        "args": ["unknown call 'drop_everything' through the store's socket"],
                        "message": "unknown call 'drop_everything' through the store's socket",
                        "code": "store_unavailable",
                    }
                }
            ]
            missing = _ask(path, {"call": "get_document", "args": {"document_id": "nope"}})
            assert missing[-1]["error"]["type"] == "DocumentNotFoundError"
            # this very process is no other owner: its own calls run here
            assert call(path, "stats", dict, None) is HERE
        finally:
            owner.held(False)
        assert not socket_path(store).exists()
        assert call(socket_path(store), "stats", dict, None) is HERE  # nobody listens


class _Held(HashEmbedder):
    """Embeds once ``go`` is set (a call in flight, for as long as a test likes)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.go.set()
        self.entered = threading.Event()

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.entered.set()
        assert self.go.wait(30)
        return super().embed(texts)


def _edge_kb(tmp_path: Path, embedder: HashEmbedder) -> tuple[KnowledgeBase, Path]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "harbour.md").write_text(HARBOUR, encoding="utf-8")
    (docs / "plans.md").write_text(PLANS, encoding="utf-8")
    write_config(tmp_path / "kb", "store:\n  lock_timeout: 1\n")
    return KnowledgeBase.open(tmp_path / "kb", embedder=embedder), docs


def test_closing_the_store_between_uses_leaves_the_calls_in_flight_and_the_kb_working(
    tmp_path: Path,
) -> None:
    embedder = _Held()
    kb, docs = _edge_kb(tmp_path, embedder)
    with kb:
        kb.ingest([docs / "harbour.md"])  # the store held: its socket served
        path = socket_path(kb.runtime.store_path)
        embedder.go.clear()
        embedder.entered.clear()
        answers: list[list[dict[str, Any]]] = []
        request = {"call": "ingest", "args": {"inputs": [str(docs / "plans.md")]}}
        caller = threading.Thread(target=lambda: answers.append(_ask(path, request)))
        caller.start()
        assert embedder.entered.wait(30)  # the ingest runs, holding the store
        kb.runtime.close_store()  # a watch's sync ends meanwhile
        embedder.go.set()
        caller.join(30)
        assert "result" in answers[0][-1], answers
        kb.runtime.close_store()  # nothing in flight now: it closes
        assert kb.runtime.opened_store is None and not path.exists()
        assert kb.stats().documents == 2


def test_a_closed_store_does_not_reopen_itself(tmp_path: Path) -> None:
    kb, docs = _edge_kb(tmp_path, HashEmbedder())
    with kb:
        kb.ingest([docs])
        old = kb.runtime.store
        kb.runtime.close_store()
        with pytest.raises(StoreError, match="was closed"):
            old.count("default")
        assert kb.stats().documents == 2


def test_the_owner_refuses_unknown_arguments_and_checks_depth_and_expand_as_here(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "harbour.md").write_text(HARBOUR, encoding="utf-8")
    write_config(tmp_path / "kb", "")
    store = tmp_path / "store"
    with memory_knowledge_base(tmp_path / "kb") as kb:
        kb.ingest([docs])
        owner = Owner(kb, store)
        owner.held(True)
        try:
            path = socket_path(store)
            alice = {"user": "alice", "groups": []}
            typo = _ask(path, {"call": "list_documents", "args": {"principle": alice}})
            assert typo[-1]["error"]["type"] == "StoreError"
            assert "no argument principle" in typo[-1]["error"]["message"]
            deep = _ask(path, {"call": "search", "args": {"text": "ferry", "depth": "DEEP"}})
            assert deep[-1]["error"]["type"] == "DepthError"
            with pytest.raises(DepthError):
                raise _raised(deep[-1]["error"], os.getpid())
            wide = _ask(path, {"call": "search", "args": {"text": "ferry", "expand": "all"}})
            assert wide[-1]["error"]["type"] == "QueryError"
            assert wide[-1]["error"]["code"] == "invalid_expand"
            with pytest.raises(QueryError) as raised:
                raise _raised(wide[-1]["error"], os.getpid())
            assert raised.value.code == "invalid_expand"
            # the caller checks before it sends, with the same error
            with pytest.raises(DepthError):
                _wire_args(KnowledgeBase.asearch, ("ferry",), {"depth": "DEEP"})
        finally:
            owner.held(False)


def test_queued_writes_leave_threads_for_the_queries(tmp_path: Path) -> None:
    embedder = _Held()
    kb, docs = _edge_kb(tmp_path, embedder)
    with kb:
        kb.ingest([docs / "harbour.md"])
        path = socket_path(kb.runtime.store_path)
        embedder.go.clear()
        embedder.entered.clear()
        writes = [
            threading.Thread(
                target=_ask,
                args=(path, {"call": "ingest", "args": {"inputs": [str(docs / "plans.md")]}}),
            )
            for _ in range(10)  # more than the threads that answer
        ]
        writes[0].start()
        assert embedder.entered.wait(30)  # one write runs, held; nine wait their turn
        for write in writes[1:]:
            write.start()
        time.sleep(0.5)
        try:
            conn = socket.socket(socket.AF_UNIX)
            conn.settimeout(10)
            with _address(path) as address:
                conn.connect(address)
            with conn, conn.makefile("rb") as stream:
                conn.sendall(json.dumps({"call": "stats", "args": {}}).encode() + b"\n")
                answer = json.loads(stream.readline())
            assert answer["result"]["documents"] == 1
        finally:
            embedder.go.set()
            for write in writes:
                write.join(60)
        assert kb.stats().documents == 2


CUT_SHORT = """
import socket, sys
listener = socket.socket(socket.AF_UNIX)
listener.bind(sys.argv[1])
listener.listen(1)
print("ready", flush=True)
conn, _ = listener.accept()
conn.makefile("rb").readline()
conn.sendall(b'{"result": {"docu')
conn.close()
"""


def test_an_owner_that_dies_mid_answer_reads_as_ended_before_answering(tmp_path: Path) -> None:
    path = tmp_path / "store.sock"
    dying = subprocess.Popen(
        [sys.executable, "-c", CUT_SHORT, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert dying.stdout is not None and dying.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match="ended before answering stats"):
            call(path, "stats", dict, None)
    finally:
        dying.wait(10)


def test_web_pages_are_imported_through_the_holder(tmp_path: Path) -> None:
    """``ingest_urls`` (what services import pages with) goes through the socket: the
    holder fetches the page and writes it, with the caller's tenant."""
    import http.server

    class Page(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = b"<html><body><h1>Tides</h1><p>High tide is at noon today.</p></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/tides.html"
    web = "  web:\n    type: web\n    allow_hosts: ['127.0.0.1']\n"
    write_config(tmp_path / "kb", "sources:\n  default: {}\n" + web)
    store = tmp_path / "store"
    try:
        with memory_knowledge_base(tmp_path / "kb") as kb:
            owner = Owner(kb, store)
            owner.held(True)
            try:
                asked = {"urls": [url], "source": "web", "tenant": "harbour"}
                call = {"call": "ingest_urls", "args": asked}
                (report,) = _ask(socket_path(store), call, lines=1)
                assert report["result"]["added"] == 1, report
                listed = kb.list_documents(tenant="harbour")
                assert [r.uri for r in listed] == [url]
                assert kb.list_documents() == []  # the caller's tenant, not the default
            finally:
                owner.held(False)
    finally:
        server.shutdown()
        server.server_close()


def test_every_call_on_the_socket_is_sent_there_by_the_shared_knowledge_base() -> None:
    """A call the owner answers but no caller sends (or the reverse) would wait out the
    store's lock beside a holder: the list and the facade must agree."""
    from flexmatch.knowledge_base import SharedKnowledgeBase
    from flexmatch.sharing import ROUTED, WRITES

    assert set(ROUTED) >= WRITES
    for name, method in ROUTED.items():
        routed = SharedKnowledgeBase.__dict__.get(method)
        assert routed is not None, f"{method} ({name}) is not routed"
        assert getattr(routed, "__wrapped__", None) is getattr(KnowledgeBase, method), method
        twin = name if method != name else None  # its sync (or async) twin, routed too
        if twin is not None:
            assert twin in SharedKnowledgeBase.__dict__, f"{twin}'s twin is not routed"


def test_a_generator_of_inputs_is_sent_whole_after_a_try_here() -> None:
    from flexmatch.sharing import _replayable

    args, kwargs = _replayable((iter(["a.md"]), "b"), {"urls": (u for u in ["http://x"])})
    assert args == (["a.md"], "b") and kwargs == {"urls": ["http://x"]}


def test_one_input_alone_goes_over_the_wire_as_one(tmp_path: Path) -> None:
    wire = _wire_args(KnowledgeBase.aingest, ("notes.md",), {})
    assert wire["inputs"] == [str(Path("notes.md").absolute())]
    pages = _wire_args(KnowledgeBase.aingest_urls, ("http://127.0.0.1/a",), {})
    assert pages["urls"] == ["http://127.0.0.1/a"]


def test_a_malformed_or_oversized_request_is_answered_with_an_error(tmp_path: Path) -> None:
    """The caller is told why, instead of reading a closed connection as a dead owner."""
    kb, docs = _edge_kb(tmp_path, HashEmbedder())
    with kb:
        kb.ingest([docs / "harbour.md"])  # the store held: its socket served
        path = socket_path(kb.runtime.store_path)
        conn = socket.socket(socket.AF_UNIX)
        with _address(path) as address:
            conn.connect(address)
        with conn, conn.makefile("rb") as stream:
            conn.sendall(b"[1, 2]\n")
            (answer,) = [json.loads(line) for line in stream]
        assert "a request is a JSON object" in answer["error"]["message"]
        conn = socket.socket(socket.AF_UNIX)
        with _address(path) as address:
            conn.connect(address)
        with conn, conn.makefile("rb") as stream:
            with contextlib.suppress(OSError):  # the owner stops reading past the limit
                conn.sendall(b'{"call": "stats", "args": {"x": "' + b"y" * MAX_REQUEST)
            answer = json.loads(stream.readline())
        assert f"over {MAX_REQUEST:,} bytes" in answer["error"]["message"]
        assert kb.stats().documents == 1  # the owner serves on
