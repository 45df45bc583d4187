"""``FakeLLMServer``: the fake model's script served on 127.0.0.1, started and stopped by a
test (or by ``python -m flexmatch.testing.fake_llm``)."""

from __future__ import annotations

import threading

from flexmatch.testing.fake_llm.handler import FakeHTTPServer, bind
from flexmatch.testing.fake_llm.script import LLMScript


class FakeLLMServer(LLMScript):
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
        super().__init__(embedding_dim, api_key=api_key, keep=keep)
        self.host = "127.0.0.1" if host == "localhost" else host
        self.port = port
        self._httpd: FakeHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> FakeLLMServer:
        if self._httpd is not None:
            return self
        self._httpd = bind(self.host, self.port, self)
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
        httpd.stop()
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
