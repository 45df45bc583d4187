"""Queued uploads cost the server disk, not memory: a real ``flexmatch serve`` holds
hundreds of megabytes of one tenant's uploads behind a held job while its RSS stays within
``MAX_RSS_GROWTH``; a killed server's spooled files are swept when it starts again, and a
stopped one removes its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.adapters.http.servers import auth
from tests.adapters.http.test_stalls import _key, _rss, _serving
from tests.adapters.http.test_upload_queue import HeldPage
from tests.conftest import write_config

CONFIG = """\
sources:
  default: {}
  web:
    type: web
    allow_hosts: ["127.0.0.1"]
    timeout: 120
"""
REQUESTS = 10
FILES = 6  # per request
FILE_BYTES = 8 * 1024 * 1024  # 10 x 6 x 8 MiB = 480 MiB queued, under the 1 GB default cap
MAX_RSS_GROWTH = 150 * 1024 * 1024  # before the spool, the server grew by all it held


def _spooled(kb: Path) -> list[Path]:
    return [p for p in (kb / ".flexmatch" / "spool").glob("*/job*/*") if p.is_file()]


def test_rss_stays_bounded_while_large_uploads_queue(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write_config(kb, CONFIG)
    token = _key(kb, "b")
    page = HeldPage()
    data = (b"The ferry leaves the harbour at nine; the spare key is under the pot.\n" * 130_000)[
        :FILE_BYTES
    ]
    try:
        with _serving(kb) as (process, client):
            held = client.post(
                "/v1/documents/url",
                json={"urls": [page.url("held")], "source": "web"},
                headers=auth(token),
            )
            assert held.status_code == 202, held.text
            before = peak = _rss(process.pid)
            for request in range(REQUESTS):
                files = [("files", (f"q{request}_{i}.txt", data)) for i in range(FILES)]
                response = client.post(
                    "/v1/documents", files=files, headers=auth(token), timeout=120
                )
                assert response.status_code == 202, response.text
                peak = max(peak, _rss(process.pid))
            growth = peak - before
            queued = REQUESTS * FILES * FILE_BYTES
            print(
                f"queued {queued / 2**20:.0f} MiB; RSS {before / 2**20:.0f} MiB -> peak "
                f"{peak / 2**20:.0f} MiB (+{growth / 2**20:.0f} MiB)"
            )
            assert growth < MAX_RSS_GROWTH, f"RSS grew {growth / 2**20:.0f} MiB"
            spooled = _spooled(kb)
            assert len(spooled) == REQUESTS * FILES
            assert sum(p.stat().st_size for p in spooled) == queued
            process.kill()  # no chance to clean up
            process.wait(timeout=30)
        assert len(_spooled(kb)) == REQUESTS * FILES

        page.gate.clear()
        with _serving(kb) as (process, client):
            assert _spooled(kb) == []  # swept at start: their jobs died with the server
            held = client.post(
                "/v1/documents/url",
                json={"urls": [page.url("again")], "source": "web"},
                headers=auth(token),
            )
            assert held.status_code == 202, held.text
            files = [("files", ("waiting.txt", data[:1_000_000]))]
            assert client.post("/v1/documents", files=files, headers=auth(token)).status_code == 202
            (waiting,) = _spooled(kb)
            assert oct(os.stat(waiting).st_mode & 0o777) == oct(0o600)
        assert _spooled(kb) == []  # a server that stops removes its own
    finally:
        page.close()
