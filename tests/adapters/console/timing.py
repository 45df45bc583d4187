"""How fast the console's pages answer on a knowledge base of 1,000 documents.

``python -m tests.adapters.console.timing [--kb DIR]`` ingests the first 1,000
paragraphs of squad-dev (offline defaults) into tenant ``default`` of a new knowledge base
(or reuses ``--kb``), starts a real ``flexmatch serve``, signs in over HTTP like a
browser (sign-in form, cookie, CSRF token), and times each page: one cold request, then
``--repeat`` warm ones, wall-clock on 127.0.0.1 (the whole request: the server's work,
the template, the transfer), median and 95th percentile.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from tests.adapters.console.harness import FLEXMATCH, config_text, running_console
from tests.conftest import SHARED_DATA


def build(kb: Path, documents: int) -> None:
    corpus = kb.parent / "corpus.jsonl"
    lines = (SHARED_DATA / "squad-dev" / "corpus.jsonl").read_text(encoding="utf-8")
    corpus.write_text("\n".join(lines.splitlines()[:documents]) + "\n", encoding="utf-8")
    kb.mkdir(parents=True, exist_ok=True)
    (kb / "flexmatch.yaml").write_text(config_text(None), encoding="utf-8")
    started = time.monotonic()
    subprocess.run(
        [str(FLEXMATCH), "ingest", "--kb", str(kb), "--tenant", "default", "--json", str(corpus)],
        check=True,
        capture_output=True,
        timeout=3600,
    )
    print(f"ingested {documents} documents in {time.monotonic() - started:.0f} s")


def sign_in(client: httpx.Client, token: str) -> str:
    page = client.get("/console/signin").text
    form = re.search(r'name="csrf" value="([^"]+)"', page)
    assert form is not None
    done = client.post("/console/signin", data={"csrf": form[1], "api_key": token, "next": ""})
    assert done.status_code == 303, done.text
    overview = client.get("/console/").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', overview)
    assert csrf is not None
    return csrf[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, help="an existing knowledge base (tenant default)")
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flexmatch-timing-") as folder:
        kb = args.kb or Path(folder) / "kb"
        if args.kb is None:
            build(kb, args.documents)
        config = (kb / "flexmatch.yaml").read_text(encoding="utf-8")
        with running_console(kb, config, rate=0) as console:
            token = console.key("timing", "default", "read,write,admin")
            with console.api(token) as api:
                listing = api.get("/v1/documents", params={"limit": 500, "offset": 500}).json()
                total = listing["total"]
                one = listing["items"][0]["id"]
            with httpx.Client(base_url=console.url, timeout=60) as client:
                sign_in(client, token)
                pages = {
                    "overview": "/console/",
                    "documents (page 1 of 20)": "/console/documents",
                    "documents (page 15)": "/console/documents?page=15",
                    "documents, text filter": "/console/documents?q=football",
                    "document detail": f"/console/documents/{one}",
                    "search (top 5, explain, facts)": "/console/search?q=Who+won+Super+Bowl+50%3F",
                    "import files": "/console/import",
                    "import URLs": "/console/import/url",
                    "chains": "/console/chains",
                    "prompt editor": "/console/chains/edit?source=default&kind=matching_text",
                    "re-index plan": "/console/chains/reindex?source=default",
                }
                rows = []
                for name, path in pages.items():
                    cold_started = time.perf_counter()
                    response = client.get(path)
                    cold = (time.perf_counter() - cold_started) * 1000
                    assert response.status_code == 200, (path, response.status_code)
                    warm = []
                    for _ in range(args.repeat):
                        started = time.perf_counter()
                        assert client.get(path).status_code == 200
                        warm.append((time.perf_counter() - started) * 1000)
                    warm.sort()
                    p95 = warm[max(0, round(0.95 * len(warm)) - 1)]
                    rows.append((name, cold, statistics.median(warm), p95))
        print(f"{total} documents in tenant default; {args.repeat} warm requests a page")
        print(f"{'page':34} {'cold ms':>8} {'median':>8} {'p95':>8}")
        for name, cold, median, p95 in rows:
            print(f"{name:34} {cold:8.1f} {median:8.1f} {p95:8.1f}")
        fields = ("page", "cold", "median", "p95")
        print(json.dumps([dict(zip(fields, row, strict=True)) for row in rows]))


if __name__ == "__main__":
    main()
