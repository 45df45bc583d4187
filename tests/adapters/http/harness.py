"""Helpers to run one real uvicorn server per test module, over a knowledge base opened in
this process with the session's embedding model (so the model loads once per run)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from flexmatch import KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore
from tests.adapters.http.servers import UvicornThread
from tests.conftest import write_config

KB_CONFIG = """\
sources:
  default: {}
  facts:
    type: records
    id_field: fact_id
    title_field: subject
  web:
    type: web
    allow_hosts: ["127.0.0.1"]
"""


@dataclass
class Api:
    """A running server: its client, its knowledge-base folder and key store, and keys."""

    client: httpx.Client
    kb_dir: Path
    keys: KeyStore
    kb: KnowledgeBase
    tokens: dict[str, str] = field(default_factory=dict)

    def key(self, name: str, tenant: str, permissions: str) -> str:
        _, token = self.keys.create(tenant, permissions, name)
        self.tokens[name] = token
        return token


@contextmanager
def running_api(
    kb_dir: Path, embedder: OnnxEmbedder, limits: Limits | None = None
) -> Iterator[Api]:
    write_config(kb_dir, KB_CONFIG)
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    # polling jobs is chatty: the rate limit has its own test, with its own tiny limits
    app = create_app(kb, limits=limits or Limits(rate_per_second=1_000, burst=1_000))
    try:
        with UvicornThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            yield Api(client=client, kb_dir=kb_dir, keys=KeyStore.for_kb(kb_dir), kb=kb)
    finally:
        kb.close()


def upload(api: Api, token: str, *paths_or_files: Path | tuple[str, bytes], **form: str) -> str:
    """POST files to /v1/documents; the job id."""
    files = []
    for item in paths_or_files:
        if isinstance(item, Path):
            files.append(("files", (item.name, item.read_bytes())))
        else:
            files.append(("files", item))
    response = api.client.post(
        "/v1/documents", files=files, data=form, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])
