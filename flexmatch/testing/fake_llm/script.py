"""What the fake server is told to do and what it saw: the knobs a test sets between
requests (latency, injected failures, malformed answers, a responder, tool calls, a key)
and the requests it recorded, apart from the HTTP plumbing that serves them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flexmatch.testing.fake_llm.answers import MALFORMED_CONTENT, default_responder
from flexmatch.testing.fake_llm.tools import tool_call_message


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


class LLMScript:
    """The fake model's behaviour and its record of requests, the part of
    ``FakeLLMServer`` that needs no socket (its docstring lists the knobs)."""

    def __init__(
        self, embedding_dim: int = 64, *, api_key: str | None = None, keep: int | None = None
    ) -> None:
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

    def reply(self, messages: list[dict], tools: Any, call_id: str) -> dict[str, Any]:
        """The assistant message that answers a chat request, as the knobs say."""
        if self.malformed:
            return {"role": "assistant", "content": MALFORMED_CONTENT}
        if tools and isinstance(tools, list) and self.tool_calls and self.responder is None:
            return tool_call_message(messages, tools, call_id)
        responder = self.responder or default_responder
        return {"role": "assistant", "content": str(responder(messages))}

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

    def _next_failure(self) -> int | None:
        with self._lock:
            if self.fail_next:
                return int(self.fail_next.pop(0))
        return None

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
