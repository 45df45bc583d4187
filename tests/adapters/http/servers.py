"""Real servers on 127.0.0.1 for the service tests: uvicorn in a thread, a tool-calling
fake chat model, and a static web page."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import uvicorn


class UvicornThread:
    """An ASGI app served by uvicorn on a free 127.0.0.1 port, in a background thread."""

    def __init__(self, app: Any, port: int = 0) -> None:
        self.app = app
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> UvicornThread:
        # IPPROTO_TCP explicitly, or asyncio does not set TCP_NODELAY on its connections
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(timeout=15)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def new_key(kb: Path, tenant: str, permissions: str) -> str:
    """A new API key's token for ``kb``'s servers, made in-process (``flexmatch keys
    create`` does the same; its own tests run it)."""
    from flexmatch.service import KeyStore

    return KeyStore.for_kb(kb).create(tenant, permissions, "test")[1]


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_for_job(
    client: httpx.Client, job_id: str, token: str, timeout: float = 60.0
) -> dict[str, Any]:
    """Poll a job until it is done or failed."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(f"/v1/jobs/{job_id}", headers=auth(token))
        assert response.status_code == 200, response.text
        job = response.json()
        if job["status"] in ("done", "failed"):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {job['status']} after {timeout}s")
        time.sleep(0.1)


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is the one JSON error shape with this status and code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) >= {"error"} and body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert "Traceback" not in response.text
    return body


# -- a chat model that calls a tool ---------------------------------------------------
class ToolCallingLLM:
    """An OpenAI-compatible chat server that answers the first request of a conversation
    with a ``search_knowledge`` tool call, and the next one (which must carry the tool
    result) with an answer quoting that result."""

    def __init__(self, query: Callable[[list[dict]], str] | None = None) -> None:
        self.query = query or (lambda messages: str(messages[-1].get("content", "")))
        self.requests: list[dict[str, Any]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ToolCallingLLM:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append(body)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._reply(404, {"error": {"message": "unknown path"}})
                    return
                self._reply(200, owner.complete(body))

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        tool_messages = [m for m in messages if m.get("role") == "tool"]
        if not tool_messages:
            arguments = json.dumps({"query": self.query(messages), "top_n": 3})
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_search_1",
                        "type": "function",
                        "function": {"name": "search_knowledge", "arguments": arguments},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            result = json.loads(tool_messages[-1]["content"])
            first = (result.get("results") or [{}])[0]
            quote = " ".join(str(first.get("content", "nothing found")).split())[:400]
            message = {
                "role": "assistant",
                "content": f"According to {first.get('uri', 'the knowledge base')}: {quote}",
            }
            finish = "stop"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }


# -- a web page to import ----------------------------------------------------------------
class PageServer:
    """Serves one HTML page on 127.0.0.1 (a loopback address: web import refuses it
    unless the source allows the host). With ``gate``, each answer waits until the gate
    is set (at most ``GATE_WAIT`` seconds): a fetch, and the job making it, stays running
    for as long as a test needs."""

    GATE_WAIT = 30.0

    def __init__(self, html: str, gate: threading.Event | None = None) -> None:
        self.html = html.encode()
        self.gate = gate
        self.requests = 0
        self._httpd: ThreadingHTTPServer | None = None

    def __enter__(self) -> PageServer:
        page = self.html
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requests += 1
                if server.gate is not None:
                    server.gate.wait(server.GATE_WAIT)
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/page.html"
