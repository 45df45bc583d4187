"""The HTTP side of the fake server: a threaded server on the loopback interface and the
handler that routes each request, records it, applies the script's latency, failures
and key, and answers in the providers' shapes."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from flexmatch.testing.fake_llm import responses
from flexmatch.testing.fake_llm.script import LLMScript, RecordedRequest
from flexmatch.testing.fake_llm.text import message_text, word_count


class FakeHTTPServer(ThreadingHTTPServer):
    """Serves one script, a thread per connection; ``stop`` also drops open connections."""

    daemon_threads = True
    allow_reuse_address = False
    # socketserver's default backlog of 5 dropped connections when a client opened 8 at
    # once, and each dropped one waited out TCP's 1 s retransmit (a provider does not)
    request_queue_size = 128

    def __init__(self, address, handler, script: LLMScript):
        self.script = script
        self.stopping = False
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request, client_address):
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        """Stay quiet about clients that went away; report anything else briefly."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)) or self.stopping:
            return
        super().handle_error(request, client_address)

    def stop(self) -> None:
        """Stop serving and drop open connections (a client may be waiting on one)."""
        self.stopping = True
        self.shutdown()
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.server_close()


class _FakeHTTPServer6(FakeHTTPServer):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "FlexMatchFakeLLM/1.0"
    server: FakeHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # ---- plumbing

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = bytearray()
            while True:
                size_line = self.rfile.readline(65537)
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline(65537)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(
        self,
        status: int,
        payload: bytes,
        content_type: str = "application/json",
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (extra_headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any, extra: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), extra_headers=extra)

    def _send_error_json(self, status: int, message: str | None = None) -> None:
        extra = {"Retry-After": "0"} if status == 429 else None
        self._send_json(status, responses.error(status, message), extra)

    # ---- dispatch

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        script = self.server.script
        raw = self._read_body() if self.command == "POST" else b""
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        body: Any = None
        bad_json = False
        if raw:
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                bad_json = True
                body = raw.decode("utf-8", "replace")

        if self.command == "GET" and path == "/stats":  # not itself counted
            self._send_json(200, script.stats())
            return
        route = self._route(path)
        injected = script._next_failure() if route is not None else None
        refused = route is not None and not self._authorised(script.api_key)
        if route is None:
            status = 404
        elif refused:
            status = 401
        elif injected is not None:
            status = injected
        elif self.command == "POST" and (bad_json or not isinstance(body, dict)):
            status = 400
        else:
            status = 200
        script._record(
            RecordedRequest(
                method=self.command,
                path=path,
                body=body,
                headers={k.lower(): v for k, v in self.headers.items()},
                status=status,
            )
        )

        if script.latency > 0:
            time.sleep(script.latency)

        if route is None:
            self._send_error_json(404, f"Unknown path: {self.command} {path}")
            return
        if refused:
            self._send_error_json(401, "Incorrect API key provided")
            return
        if injected is not None:
            self._send_error_json(injected)
            return
        if status == 400:
            self._send_error_json(400, "Request body must be a JSON object")
            return
        try:
            route(body if isinstance(body, dict) else {})
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as exc:  # pragma: no cover - defensive: answer, never hang
            self._send_error_json(500, f"Fake server error: {exc!r}")

    def _authorised(self, key: str | None) -> bool:
        if key is None:
            return True
        given = self.headers.get("Authorization") or ""
        return given == f"Bearer {key}" or self.headers.get("x-api-key") == key

    def _route(self, path: str) -> Callable[[dict], None] | None:
        if self.command == "POST":
            if path in ("/v1/chat/completions", "/chat/completions"):
                return self._chat
            if path in ("/v1/embeddings", "/embeddings"):
                return self._embeddings
            if path in ("/v2/rerank", "/v1/rerank", "/rerank"):
                return self._rerank
        elif self.command == "GET" and path in ("/v1/models", "/models"):
            return self._models
        return None

    # ---- endpoints

    # ---- endpoints

    def _chat(self, body: dict) -> None:
        script = self.server.script
        messages = body.get("messages") or []
        if not isinstance(messages, list):
            messages = []
        messages = [m for m in messages if isinstance(m, dict)]
        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        message = script.reply(messages, body.get("tools"), f"call_{cid[-12:]}")
        content = message["content"] or ""
        calls = message.get("tool_calls") or []
        model = str(body.get("model") or "fake")
        prompt_tokens = sum(word_count(message_text(m)) for m in messages)
        completion_tokens = word_count(content) + sum(
            word_count(c["function"]["arguments"]) for c in calls
        )
        script._count(prompt_tokens, completion_tokens, len(calls))
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        created = int(time.time())
        if body.get("stream"):
            payload = responses.chat_stream(cid, created, model, message, usage, body)
            self._send(200, payload, "text/event-stream", {"Cache-Control": "no-cache"})
            return
        self._send_json(200, responses.chat_completion(cid, created, model, message, usage))

    def _embeddings(self, body: dict) -> None:
        self._send_json(200, responses.embeddings(body, self.server.script.embedding_dim))

    def _rerank(self, body: dict) -> None:
        self._send_json(200, responses.rerank(body))

    def _models(self, body: dict) -> None:
        self._send_json(200, responses.models())


def bind(host: str, port: int, script: LLMScript) -> FakeHTTPServer:
    """A server for ``script`` bound to ``host``:``port`` (IPv6 for ``::1``), not yet serving."""
    server_cls = _FakeHTTPServer6 if ":" in host else FakeHTTPServer
    return server_cls((host, port), _Handler, script)
