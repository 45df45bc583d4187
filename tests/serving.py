"""A real ``flexmatch serve`` on 127.0.0.1, for tests that run the same code against an
embedded knowledge base and a served one (the remote client, the framework adapters)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from flexmatch.service import KeyStore
from tests.adapters.http.harness import KB_CONFIG  # the same three sources
from tests.adapters.http.servers import free_port
from tests.conftest import FLEXMATCH, stop, write_config


@dataclass
class Served:
    """A running server: its URL and its knowledge base's key store."""

    url: str
    kb_dir: Path

    def key(self, tenant: str, permissions: str = "read,write") -> str:
        """A new API key's token (each test takes a tenant of its own)."""
        _, token = KeyStore.for_kb(self.kb_dir).create(tenant, permissions, "test")
        return token


@contextmanager
def served_kb(kb_dir: Path, config: str = KB_CONFIG, *options: str) -> Iterator[Served]:
    """``flexmatch serve`` over a new knowledge base in ``kb_dir`` (``options`` added to its
    command line), until the block ends."""
    write_config(kb_dir, config)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEXMATCH_")}
    process = subprocess.Popen(
        [
            str(FLEXMATCH),
            "serve",
            "--kb",
            str(kb_dir),
            "--port",
            str(port),
            "--log-level",
            "warning",
            *options,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "HF_HUB_OFFLINE": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"flexmatch serve exited: {process.communicate()[1]}")
            try:
                if httpx.get(f"{url}/health/ready", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("flexmatch serve never became ready")
            time.sleep(0.2)
        yield Served(url=url, kb_dir=kb_dir)
    finally:
        stop(process)
