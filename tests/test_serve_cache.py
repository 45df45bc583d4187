"""A document removed by another process through ``flexmatch serve``'s store (``docs
remove`` beside the server, over the store's socket) is never served from the server's
answer cache afterwards. Real processes (``tests/tiers.py`` marks the module slow)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx

from flexmatch import DEFAULT_TENANT
from flexmatch.service import KeyStore
from tests.adapters.http.servers import free_port
from tests.conftest import FLEXMATCH, run, stop, write_config

FERRY = "# Harbour\n\nThe ferry to Gull Island leaves the harbour at nine every morning.\n"
FEES = "# Fees\n\nMooring fees are paid at the harbour office before noon.\n"
QUESTION = {"query": "When does the ferry to Gull Island leave?", "top_n": 5}


def _wait_until_ready(client: httpx.Client, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None, f"the server exited: {process.returncode}"
        try:
            if client.get("/health/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server never became ready"
        time.sleep(0.2)


def test_a_document_removed_beside_the_server_is_not_served_from_its_cache(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "harbour.md").write_text(FERRY, encoding="utf-8")
    (docs / "fees.md").write_text(FEES, encoding="utf-8")
    kb = tmp_path / "kb"
    write_config(kb, "sources:\n  default:\n    paths: [../docs]\nstore:\n  lock_timeout: 30\n")
    synced = run("sync", "--kb", str(kb))
    assert synced.returncode == 0, synced.stderr
    listed = json.loads(run("docs", "list", "--kb", str(kb), "--json").stdout)
    ferry = next(r["id"] for r in listed if r["uri"].endswith("harbour.md"))
    _, token = KeyStore.for_kb(kb).create(DEFAULT_TENANT, "read", "e2e")

    port = free_port()
    process = subprocess.Popen(
        [str(FLEXMATCH), "serve", "--kb", str(kb), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            _wait_until_ready(client, process)

            def ask() -> tuple[str, list[dict[str, object]]]:
                response = client.post("/v1/search", json=QUESTION)
                assert response.status_code == 200, response.text
                return response.headers["x-cache"], response.json()["results"]

            assert ask()[0] == "miss"
            state, before = ask()
            assert state == "hit" and ferry in {r["document_id"] for r in before}

            removed = run("docs", "remove", ferry, "--kb", str(kb))  # through the socket
            assert removed.returncode == 0, removed.stderr
            assert process.poll() is None  # the server kept the store all along

            state, after = ask()
            assert state == "miss"
            assert ferry not in {r["document_id"] for r in after}
            assert all("Gull Island" not in json.dumps(r) for r in after)
    finally:
        stop(process)
