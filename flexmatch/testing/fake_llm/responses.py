"""The bodies the fake server sends, in the providers' shapes: OpenAI chat completions
(whole or streamed as server-sent events), embeddings, model lists and errors, and
Cohere v2 rerank results."""

from __future__ import annotations

import base64
import json
import re
import struct
import uuid
from typing import Any

from flexmatch.testing.fake_llm.text import embed_text, overlap_score, word_count

MODELS = ["fake", "fake-embed", "rerank-v3.5"]

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


def error(status: int, message: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body (with Cohere's top-level ``message`` too)."""
    etype, code = _ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", str(status))
    )
    return {
        "error": {
            "message": message or f"Injected fake error {status}",
            "type": etype,
            "param": None,
            "code": code,
        },
        "message": message or f"Injected fake error {status}",
    }


def chat_completion(
    cid: str, created: int, model: str, message: dict[str, Any], usage: dict
) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
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
    }


def chat_stream(
    cid: str, created: int, model: str, message: dict[str, Any], usage: dict, body: dict
) -> bytes:
    """The completion as server-sent events: the content word by word, then the tool
    calls, then (when ``stream_options`` asks for it) the usage."""

    def chunk(delta: dict, finish: str | None) -> dict:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
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


def embeddings(body: dict, default_dim: int) -> dict[str, Any]:
    """Hashed bag-of-words vectors for ``input`` (a text, texts or token arrays)."""
    raw_input = body.get("input", "")
    if isinstance(raw_input, str):
        texts = [raw_input]
    elif raw_input and isinstance(raw_input, list) and all(isinstance(t, int) for t in raw_input):
        texts = [" ".join(str(t) for t in raw_input)]  # a single token array
    elif isinstance(raw_input, list):
        texts = [t if isinstance(t, str) else " ".join(map(str, t)) for t in raw_input]
    else:
        texts = [str(raw_input)]
    dims = body.get("dimensions")
    dim = int(dims) if isinstance(dims, int) and dims > 0 else default_dim
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for i, text in enumerate(texts):
        vec = embed_text(text, dim)
        emb: Any = vec
        if as_base64:
            emb = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode("ascii")
        data.append({"object": "embedding", "index": i, "embedding": emb})
    tokens = sum(word_count(t) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": str(body.get("model") or "fake-embed"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def rerank(body: dict) -> dict[str, Any]:
    """Cohere v2 rerank results: token-overlap scores, best first."""
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
    return {
        "id": str(uuid.uuid4()),
        "results": results,
        "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
    }


def models() -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": m, "object": "model", "created": 0, "owned_by": "flexmatch"} for m in MODELS
        ],
    }
