"""The real ``flexmatch keys`` and ``flexmatch serve`` commands, as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.adapters.http.servers import auth, free_port
from tests.conftest import REPO, write_config

FLEXMATCH = Path(sys.executable).parent / "flexmatch"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLEXMATCH_KB"}
    return subprocess.run(
        [str(FLEXMATCH), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**env, "COLUMNS": "200"},
        timeout=120,
    )


def test_keys_commands(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write_config(kb, "")
    created = run(
        "keys", "create", "--kb", str(kb), "--tenant", "acme", "--permissions", "read,write"
    )
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("fm_") and "store it now" in created.stderr
    as_json = run("keys", "create", "--kb", str(kb), "--tenant", "ops", "--json", "--name", "bot")
    second = json.loads(as_json.stdout)
    assert second["tenant"] == "ops" and second["permissions"] == ["read"]

    listed = json.loads(run("keys", "list", "--kb", str(kb), "--json").stdout)
    assert [k["tenant"] for k in listed] == ["acme", "ops"]
    assert token not in json.dumps(listed) and "token" not in listed[0]
    only = json.loads(run("keys", "list", "--kb", str(kb), "--tenant", "ops", "--json").stdout)
    assert [k["id"] for k in only] == [second["id"]]
    table = run("keys", "list", "--kb", str(kb))
    assert "acme" in table.stdout and "active" in table.stdout

    key_id = token.split("_")[1]
    revoked = run("keys", "revoke", key_id, "--kb", str(kb))
    assert revoked.returncode == 0 and f"Revoked {key_id}" in revoked.stdout
    assert json.loads(run("keys", "list", "--kb", str(kb), "--json").stdout)[0]["revoked"]
    missing = run("keys", "revoke", "ffffffffffff", "--kb", str(kb))
    assert missing.returncode == 2 and "no key 'ffffffffffff'" in missing.stderr
    bad = run("keys", "create", "--kb", str(kb), "--permissions", "root")
    assert bad.returncode == 2 and "permissions must be" in bad.stderr
    long = run("keys", "create", "--kb", str(kb), "--name", "n" * 300)
    assert long.returncode == 2 and "300 characters long; at most 200" in long.stderr
    escape = run("keys", "create", "--kb", str(kb), "--name", "\x1b]0;pwn\x07")
    assert escape.returncode == 2 and "U+001B" in escape.stderr
    assert "Traceback" not in bad.stderr + missing.stderr + long.stderr + escape.stderr
    nowhere = run("keys", "list", "--kb", str(tmp_path / "missing"))
    assert nowhere.returncode == 2 and "not a knowledge-base folder" in nowhere.stderr


def test_serve_command(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write_config(kb, "")
    token = run("keys", "create", "--kb", str(kb), "--permissions", "read,write").stdout.strip()
    port = free_port()
    process = subprocess.Popen(
        [str(FLEXMATCH), "serve", "--kb", str(kb), "--port", str(port), "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + 90
            while True:
                assert process.poll() is None, process.communicate()[1]
                try:
                    if client.get("/health/ready").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "the server never became ready"
                time.sleep(0.2)
            response = client.post(
                "/v1/documents",
                files={"files": ("note.md", b"# Note\n\nThe spare key is under the blue pot.")},
                headers=auth(token),
            )
            assert response.status_code == 202, response.text
            job_url = response.headers["location"]
            while (job := client.get(job_url, headers=auth(token)).json())["status"] != "done":
                assert job["status"] in ("queued", "running") and time.monotonic() < deadline
                time.sleep(0.05)
            found = client.get(
                "/v1/search", params={"query": "Where is the spare key?"}, headers=auth(token)
            ).json()
            assert "blue pot" in found["results"][0]["content"]
            assert client.get("/v1/stats").status_code == 401
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert "Traceback" not in stderr
