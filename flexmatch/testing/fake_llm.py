"""A real, local, deterministic fake LLM server for tests, demos and benchmarks.

Tests exercise the real litellm and cohere client code against this server over HTTP on
127.0.0.1 instead of patching clients. Standard library only. It is also a command, for
trying FlexMatch (or an agent loop) offline, with no key and no model::

    python -m flexmatch.testing.fake_llm --port 8001 [--latency 0.2] [--api-key KEY]
    FLEXMATCH_LLM=openai/fake FLEXMATCH_LLM_API_BASE=http://127.0.0.1:8001/v1 flexmatch ...

Endpoints
---------
- ``POST /v1/chat/completions`` (also ``/chat/completions``): OpenAI shape, SSE when
  ``"stream": true``.
- ``POST /v1/embeddings`` (also ``/embeddings``): OpenAI shape, hashed bag-of-words vectors.
- ``POST /v2/rerank``: Cohere v2 shape, token-overlap scores in [0, 1].
- ``GET /v1/models`` (also ``/models``): a small model list.
- ``GET /stats``: requests so far (``calls``), tokens, and counts per path and status.
- anything else: 404 with an OpenAI-style error body.

Tool calls: a chat request that offers ``tools`` is answered the way a tool-using model
answers (unless ``tool_calls`` is off or a ``responder`` is set): first with an
``assistant`` message whose ``tool_calls`` call the offered tool that takes a ``query``
(else the first) with the last user message as the query; once the conversation holds
the tool's result, with words quoting it ("According to <uri>: <passage>").

With ``api_key`` set, a model request without ``Authorization: Bearer <key>`` gets a 401,
as a provider answers a wrong key.

Usage::

    with FakeLLMServer() as server:
        litellm.completion(model="openai/fake", api_base=server.base_url, api_key="x", ...)
        cohere.ClientV2(api_key="x", base_url=server.root_url).rerank(...)
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import math
import re
import signal
import socket
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "MALFORMED_CONTENT",
    "FakeLLMServer",
    "RecordedRequest",
    "default_responder",
    "embed_text",
    "main",
    "overlap_score",
    "tool_call_message",
]

MALFORMED_CONTENT = (
    'Sure! here are some questions: 1. What is it? 2. Why? ... {"questions": ["broken'
)

_MODELS = ["fake", "fake-embed", "rerank-v3.5"]

_TOKEN_RE = re.compile(r"[a-z0-9]+")
_COUNT_RE = re.compile(r"(\d+)\s+questions", re.IGNORECASE)
_CANDIDATE_RE = re.compile(r"^\s*\[(\d+)\]\s*(.*)$")
_CANDIDATE_TAG_RE = re.compile(r'<candidate index="(\d+)">(.*?)</candidate>', re.DOTALL)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "what",
        "which",
        "who",
        "will",
        "with",
        "does",
        "do",
        "how",
    ]
)

_ERROR_TYPES = {
    400: ("invalid_request_error", "bad_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "forbidden"),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout_error", "timeout"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "gateway_timeout"),
}


# --------------------------------------------------------------------------- text helpers


def _tokens(text: str) -> list[str]:
    """Lowercase word tokens."""
    return _TOKEN_RE.findall(text.lower())


def _content_tokens(text: str) -> set[str]:
    """Token set without stopwords (falls back to all tokens if only stopwords remain)."""
    toks = set(_tokens(text))
    content = toks - _STOPWORDS
    return content or toks


def overlap_score(query: str, document: str) -> float:
    """Set-overlap similarity (Ochiai: |q&d| / sqrt(|q|*|d|)) of content tokens, in [0, 1]."""
    q = _content_tokens(query)
    d = _content_tokens(document)
    if not q or not d:
        return 0.0
    return len(q & d) / math.sqrt(len(q) * len(d))


def embed_text(text: str, dim: int = 64) -> list[float]:
    """Deterministic L2-normalised hashed bag of lowercase word tokens.

    Each token is hashed (blake2b) to a bucket and a sign. Texts sharing words get similar
    vectors. Empty text maps to the unit vector e0 so cosine similarity stays defined.
    """
    vec = [0.0] * dim
    for tok in _tokens(text):
        digest = hashlib.blake2b(tok.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dim
        sign = 1.0 if digest[4] & 1 else -1.0
        vec[bucket] += sign
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


def _word_count(text: str) -> int:
    return len(text.split())


def _message_text(message: dict) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""


def _prompt_text(messages: list[dict]) -> str:
    return "\n".join(_message_text(m) for m in messages)


def _tag(prompt: str, name: str) -> str | None:
    """Content of the last ``<name>...</name>`` block that holds no nested opening tag."""
    pattern = re.compile(rf"<{name}>((?:(?!<{name}>).)*?)</{name}>", re.DOTALL | re.IGNORECASE)
    matches = pattern.findall(prompt)
    if not matches:
        return None
    return matches[-1].strip()


def _sentences(text: str) -> list[str]:
    out = []
    for piece in _SENTENCE_SPLIT_RE.split(text):
        piece = piece.strip().lstrip("#*->").strip()
        if piece and _tokens(piece):
            out.append(piece)
    return out


# --------------------------------------------------------------------------- responder


def _rerank_answer(prompt: str) -> str:
    query = _tag(prompt, "query") or ""
    block = _tag(prompt, "candidates")
    if block is not None:  # "[i] text" lines inside <candidates>
        found = [m.groups() for m in map(_CANDIDATE_RE.match, block.splitlines()) if m]
    else:  # <candidate index="i">text</candidate>
        found = _CANDIDATE_TAG_RE.findall(prompt)
    scores = [
        {"index": int(index), "score": round(10.0 * overlap_score(query, text), 2)}
        for index, text in found
    ]
    return json.dumps({"scores": scores})


def _context_answer(prompt: str) -> str:
    document = _tag(prompt, "document") or ""
    first_line = next((ln.strip() for ln in document.splitlines() if ln.strip()), "")
    title = (_tag(prompt, "title") or first_line)[:80]
    sentences = _sentences(_tag(prompt, "chunk") or "")
    first = sentences[0] if sentences else ""
    return f'This section of "{title}" covers: {first}'


def _questions_answer(prompt: str) -> str:
    m = _COUNT_RE.search(prompt)
    count = int(m.group(1)) if m else 3
    questions = []
    for sentence in _sentences(_tag(prompt, "chunk") or "")[:count]:
        words = " ".join(sentence.split()[:8]).lower().rstrip(".,;:!?-\"')( ")
        questions.append(f"What does the text say about {words}?")
    return json.dumps({"questions": questions})


def _rewrite_answer(prompt: str) -> str:
    query = (_tag(prompt, "query") or "").strip().rstrip(".?!,;: ").strip()
    if query:
        query = query[0].upper() + query[1:]
    return json.dumps({"questions": [f"{query}?"]})


_CHUNK_BLOCK_RE = re.compile(r'<chunk id="(\d+)">(.*?)</chunk>', re.DOTALL)
_DOCUMENT_BLOCK_RE = re.compile(r"<document>(.*?)</document>", re.DOTALL)
_INNER_TAG_RE = re.compile(r"<(title|section)>.*?</\1>", re.DOTALL)


def _chunk_blocks(prompt: str) -> list[tuple[int, int, str]]:
    """(position, id, text) of each ``<chunk id="n">`` block, its title/section removed."""
    return [
        (m.start(), int(m.group(1)), _INNER_TAG_RE.sub("", m.group(2)).strip())
        for m in _CHUNK_BLOCK_RE.finditer(prompt)
    ]


def _grouped_questions_answer(prompt: str) -> str:
    m = _COUNT_RE.search(prompt)
    count = int(m.group(1)) if m else 3
    entries = []
    for _, number, text in _chunk_blocks(prompt):
        questions = []
        for sentence in _sentences(text)[:count]:
            words = " ".join(sentence.split()[:8]).lower().rstrip(".,;:!?-\"')( ")
            questions.append(f"What does the text say about {words}?")
        entries.append({"chunk": number, "questions": questions})
    return json.dumps({"chunks": entries})


def _key_terms(text: str, count: int) -> list[str]:
    """The first ``count`` distinct content words: a deterministic stand-in for key phrases."""
    return list(dict.fromkeys(sorted(_content_tokens(text), key=text.lower().find)))[:count]


def _keywords_answer(prompt: str) -> str:
    """Key phrases of a query (``<query>``) or of each chunk of a group."""
    if '<chunk id="' not in prompt:
        return json.dumps({"keywords": _key_terms(_tag(prompt, "query") or "", 5)})
    entries = [
        {"chunk": number, "keywords": _key_terms(text, 8)}
        for _, number, text in _chunk_blocks(prompt)
    ]
    return json.dumps({"chunks": entries})


def _grouped_context_answer(prompt: str) -> str:
    documents = [
        (m.end(), (_tag(m.group(0), "title") or "")[:80])
        for m in _DOCUMENT_BLOCK_RE.finditer(prompt)
    ]
    entries = []
    for position, number, text in _chunk_blocks(prompt):
        title = next((t for end, t in reversed(documents) if end <= position), "")
        sentences = _sentences(text)
        first = sentences[0] if sentences else ""
        entries.append({"chunk": number, "context": f'This section of "{title}" covers: {first}'})
    return json.dumps({"chunks": entries})


def default_responder(messages: list[dict]) -> str:
    """Deterministic assistant content derived from the prompt (see module docstring)."""
    prompt = _prompt_text(messages)
    if "<candidates>" in prompt or "<candidate index=" in prompt:
        return _rerank_answer(prompt)
    if '"keywords": [' in prompt:  # the keywords chains' answer form
        return _keywords_answer(prompt)
    if '<chunk id="' in prompt:  # chunks asked about in groups
        if "<document>" in prompt:
            return _grouped_context_answer(prompt)
        return _grouped_questions_answer(prompt)
    if "<document>" in prompt:
        return _context_answer(prompt)
    if "<chunk>" in prompt:
        return _questions_answer(prompt)
    if "<query>" in prompt:
        return _rewrite_answer(prompt)
    return "OK"


def _chosen_tool(tools: list[Any]) -> dict[str, Any] | None:
    """The offered function that takes a ``query`` (a search tool), else the first one."""
    functions = [
        t["function"]
        for t in tools
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("name")
    ]
    for function in functions:
        properties = (function.get("parameters") or {}).get("properties") or {}
        if "query" in properties:
            return function
    return functions[0] if functions else None


def _tool_answer(content: str) -> str:
    """Words quoting a tool's result: its first passage and where it came from."""
    try:
        result = json.loads(content)
    except ValueError:
        result = None
    if isinstance(result, dict) and isinstance(result.get("results"), list):
        if not result["results"]:
            return "The knowledge base has nothing on that."
        first = result["results"][0] if isinstance(result["results"][0], dict) else {}
        where = first.get("uri") or first.get("title") or "the knowledge base"
        passage = " ".join(str(first.get("content", "")).split())[:400]
        return f"According to {where}: {passage}"
    if isinstance(result, dict) and result.get("error"):
        return f"The tool failed: {result['error']}"
    return "The tool returned: " + " ".join(content.split())[:400]


def tool_call_message(messages: list[dict], tools: list[Any], call_id: str) -> dict[str, Any]:
    """The assistant message a tool-using model sends: a call of the offered search tool
    while the conversation has no tool result since the user spoke, then an answer."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    results = [m for m in messages[last_user + 1 :] if m.get("role") == "tool"]
    if results:
        return {"role": "assistant", "content": _tool_answer(_message_text(results[-1]))}
    function = _chosen_tool(tools)
    if function is None:
        return {"role": "assistant", "content": "OK"}
    properties = (function.get("parameters") or {}).get("properties") or {}
    question = _message_text(messages[last_user]) if last_user >= 0 else ""
    arguments = {"query": question} if "query" in properties else {}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": function["name"], "arguments": json.dumps(arguments)},
            }
        ],
    }


# --------------------------------------------------------------------------- server


@dataclass
class RecordedRequest:
    """One request the server saw (including injected failures)."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]
    status: int = 0
    timestamp: float = field(default_factory=time.time)


@dataclass
class _Totals:
    """Running counts for ``/stats`` (``requests`` may be trimmed; these never are)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    paths: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False
    # socketserver's default backlog of 5 dropped connections when a client opened 8 at
    # once, and each dropped one waited out TCP's 1 s retransmit (a provider does not)
    request_queue_size = 128

    def __init__(self, address, handler, fake: FakeLLMServer):
        self.fake = fake
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
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)) or not self.fake.running:
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _HTTPServer6(_HTTPServer):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "FlexMatchFakeLLM/1.0"
    server: _HTTPServer

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
        etype, code = _ERROR_TYPES.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", str(status))
        )
        body = {
            "error": {
                "message": message or f"Injected fake error {status}",
                "type": etype,
                "param": None,
                "code": code,
            },
            "message": message or f"Injected fake error {status}",
        }
        extra = {"Retry-After": "0"} if status == 429 else None
        self._send_json(status, body, extra)

    # ---- dispatch

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        fake = self.server.fake
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
            self._send_json(200, fake.stats())
            return
        route = self._route(path)
        injected = fake._next_failure() if route is not None else None
        refused = route is not None and not self._authorised(fake.api_key)
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
        fake._record(
            RecordedRequest(
                method=self.command,
                path=path,
                body=body,
                headers={k.lower(): v for k, v in self.headers.items()},
                status=status,
            )
        )

        if fake.latency > 0:
            time.sleep(fake.latency)

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

    def _chat(self, body: dict) -> None:
        fake = self.server.fake
        messages = body.get("messages") or []
        if not isinstance(messages, list):
            messages = []
        messages = [m for m in messages if isinstance(m, dict)]
        tools = body.get("tools")
        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        message: dict[str, Any]
        if fake.malformed:
            message = {"role": "assistant", "content": MALFORMED_CONTENT}
        elif tools and isinstance(tools, list) and fake.tool_calls and fake.responder is None:
            message = tool_call_message(messages, tools, f"call_{cid[-12:]}")
        else:
            responder = fake.responder or default_responder
            message = {"role": "assistant", "content": str(responder(messages))}
        content = message["content"] or ""
        calls = message.get("tool_calls") or []
        model = str(body.get("model") or "fake")
        prompt_tokens = sum(_word_count(_message_text(m)) for m in messages)
        completion_tokens = _word_count(content) + sum(
            _word_count(c["function"]["arguments"]) for c in calls
        )
        fake._count(prompt_tokens, completion_tokens, len(calls))
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        created = int(time.time())
        finish = "tool_calls" if calls else "stop"
        if body.get("stream"):
            payload = self._sse(cid, created, model, message, usage, body)
            self._send(200, payload, "text/event-stream", {"Cache-Control": "no-cache"})
            return
        self._send_json(
            200,
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": finish,
                    }
                ],
                "usage": usage,
            },
        )

    @staticmethod
    def _sse(
        cid: str, created: int, model: str, message: dict[str, Any], usage: dict, body: dict
    ) -> bytes:
        def chunk(delta: dict, finish: str | None) -> dict:
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }

        events: list[dict] = [chunk({"role": "assistant", "content": ""}, None)]
        pieces = re.findall(r"\S+\s*|\s+", message["content"] or "")
        for piece in pieces:
            events.append(chunk({"content": piece}, None))
        calls = message.get("tool_calls") or []
        if calls:
            indexed = [{"index": i, **call} for i, call in enumerate(calls)]
            events.append(chunk({"tool_calls": indexed}, None))
        events.append(chunk({}, "tool_calls" if calls else "stop"))
        stream_options = body.get("stream_options")
        if isinstance(stream_options, dict) and stream_options.get("include_usage"):
            last = chunk({}, None)
            last["choices"] = []
            last["usage"] = usage
            events.append(last)
        out = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return out.encode("utf-8")

    def _embeddings(self, body: dict) -> None:
        fake = self.server.fake
        raw_input = body.get("input", "")
        if isinstance(raw_input, str):
            texts = [raw_input]
        elif (
            raw_input and isinstance(raw_input, list) and all(isinstance(t, int) for t in raw_input)
        ):
            texts = [" ".join(str(t) for t in raw_input)]  # a single token array
        elif isinstance(raw_input, list):
            texts = [t if isinstance(t, str) else " ".join(map(str, t)) for t in raw_input]
        else:
            texts = [str(raw_input)]
        dims = body.get("dimensions")
        dim = int(dims) if isinstance(dims, int) and dims > 0 else fake.embedding_dim
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(texts):
            vec = embed_text(text, dim)
            emb: Any = vec
            if as_base64:
                emb = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode("ascii")
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(_word_count(t) for t in texts)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": str(body.get("model") or "fake-embed"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _rerank(self, body: dict) -> None:
        query = str(body.get("query") or "")
        docs = body.get("documents") or []
        texts = []
        for doc in docs:
            if isinstance(doc, dict):
                texts.append(str(doc.get("text", " ".join(str(v) for v in doc.values()))))
            else:
                texts.append(str(doc))
        results = [
            {"index": i, "relevance_score": round(overlap_score(query, t), 6)}
            for i, t in enumerate(texts)
        ]
        results.sort(key=lambda r: (-r["relevance_score"], r["index"]))
        top_n = body.get("top_n")
        if isinstance(top_n, int) and top_n >= 0:
            results = results[:top_n]
        self._send_json(
            200,
            {
                "id": str(uuid.uuid4()),
                "results": results,
                "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
            },
        )

    def _models(self, body: dict) -> None:
        self._send_json(
            200,
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "flexmatch"}
                    for m in _MODELS
                ],
            },
        )


class FakeLLMServer:
    """A deterministic OpenAI/Cohere-compatible HTTP server on 127.0.0.1 for tests.

    Attributes you may set between requests:

    - ``latency``: seconds to sleep before answering each request.
    - ``fail_next``: status codes answered to the next requests, one consumed per request
      (a 429 carries ``Retry-After: 0``; all failures carry an OpenAI-style error body).
    - ``malformed``: chat completions answer with non-JSON, off-task content.
    - ``responder``: ``messages -> content`` override for chat completions.
    - ``tool_calls``: answer requests that offer tools with tool calls (default on).
    - ``api_key``: the only key accepted (None: any or none).
    - ``keep``: how many requests ``requests`` holds, the oldest dropped (None: all).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        embedding_dim: int = 64,
        *,
        api_key: str | None = None,
        keep: int | None = None,
    ):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("FakeLLMServer only binds to the loopback interface")
        self.host = "127.0.0.1" if host == "localhost" else host
        self.port = port
        self.embedding_dim = embedding_dim
        self.latency: float = 0.0
        self.fail_next: list[int] = []
        self.malformed: bool = False
        self.responder: Callable[[list[dict]], str] | None = None
        self.tool_calls: bool = True
        self.api_key = api_key
        self.keep = keep
        self.requests: list[RecordedRequest] = []
        self._totals = _Totals()
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> FakeLLMServer:
        if self._httpd is not None:
            return self
        server_cls = _HTTPServer6 if ":" in self.host else _HTTPServer
        self._httpd = server_cls((self.host, self.port), _Handler, self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeLLMServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._httpd = None
        self._thread = None
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    # ---- urls

    @property
    def root_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeLLMServer is not started; call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # ---- bookkeeping

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)
            if self.keep is not None and len(self.requests) > self.keep:
                del self.requests[: len(self.requests) - self.keep]
            self._totals.calls += 1
            self._totals.paths[req.path] = self._totals.paths.get(req.path, 0) + 1
            status = str(req.status)
            self._totals.statuses[status] = self._totals.statuses.get(status, 0) + 1

    def _count(self, prompt_tokens: int, completion_tokens: int, tool_calls: int) -> None:
        with self._lock:
            self._totals.prompt_tokens += prompt_tokens
            self._totals.completion_tokens += completion_tokens
            self._totals.tool_calls += tool_calls

    def stats(self) -> dict[str, Any]:
        """What ``GET /stats`` answers: requests (failures included), chat tokens, tool
        calls made, and requests per path and per status, since start or ``reset``."""
        with self._lock:
            totals = self._totals
            return {
                "calls": totals.calls,
                "tokens": {
                    "prompt": totals.prompt_tokens,
                    "completion": totals.completion_tokens,
                    "total": totals.prompt_tokens + totals.completion_tokens,
                },
                "tool_calls": totals.tool_calls,
                "paths": dict(sorted(totals.paths.items())),
                "statuses": dict(sorted(totals.statuses.items())),
                "latency": self.latency,
            }

    def _next_failure(self) -> int | None:
        with self._lock:
            if self.fail_next:
                return int(self.fail_next.pop(0))
        return None

    def calls(self, path_suffix: str = "/chat/completions") -> int:
        """How many requests (including injected failures) hit a path ending in the suffix."""
        with self._lock:
            return sum(1 for r in self.requests if r.path.endswith(path_suffix))

    def successful_calls(self, path_suffix: str = "/chat/completions") -> int:
        """How many requests to a path ending in the suffix were answered with 2xx."""
        with self._lock:
            return sum(
                1 for r in self.requests if r.path.endswith(path_suffix) and 200 <= r.status < 300
            )

    def requests_to(self, path_suffix: str = "/chat/completions") -> list[RecordedRequest]:
        """A snapshot of the recorded requests to paths ending in the suffix."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith(path_suffix)]

    def reset(self) -> None:
        """Clear recorded requests and restore every knob to its default."""
        with self._lock:
            self.requests.clear()
            self.fail_next = []
            self._totals = _Totals()
        self.latency = 0.0
        self.malformed = False
        self.responder = None
        self.tool_calls = True


# --------------------------------------------------------------------------- command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m flexmatch.testing.fake_llm",
        description=(
            "A deterministic OpenAI- and Cohere-compatible LLM server on the loopback "
            "interface: chat (with tool calls), embeddings, rerank, and GET /stats."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1", help="127.0.0.1 or ::1 (loopback only).")
    parser.add_argument("--port", type=int, default=8001, help="Port (0: any free one).")
    parser.add_argument(
        "--latency", type=float, default=0.0, metavar="S", help="Seconds before each answer."
    )
    parser.add_argument("--api-key", default=None, help="Refuse (401) any other key.")
    parser.add_argument(
        "--no-tool-calls",
        action="store_true",
        help="Answer requests that offer tools in words, never with a tool call.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until interrupted (Ctrl+C or SIGTERM); the first line printed says where."""
    args = _parser().parse_args(argv)
    if args.latency < 0:
        print("error: --latency must be 0 or more seconds", file=sys.stderr)
        return 2
    try:
        server = FakeLLMServer(args.host, args.port, api_key=args.api_key, keep=1000)
        server.latency = args.latency
        server.tool_calls = not args.no_tool_calls
        server.start()
    except (ValueError, OSError) as exc:
        print(f"error: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    print(
        f"Fake LLM server on {server.base_url} (stats: {server.root_url}/stats); Ctrl+C stops it",
        flush=True,
    )
    try:
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
