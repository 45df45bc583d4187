"""``python -m flexmatch.testing.fake_llm``: the fake server as a command, for trying
FlexMatch (or an agent loop) offline, with no key and no model."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from flexmatch.testing.fake_llm.server import FakeLLMServer


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
