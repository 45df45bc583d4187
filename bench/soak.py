"""Soak: a pool of loopback clients against a real ``flexmatch serve`` for a fixed time.

Clients of several tenants mix uploads, URL imports (from a page server on 127.0.0.1),
searches, PUTs and deletes. At the end every acknowledged write is checked (an added or
replaced document is there with its latest content, a deleted one is gone), and every
tenant's documents and unique words are looked for with every other tenant's key (never
found). Prints requests, errors by status, and p50/p95 latency per operation.

Run:  .venv/bin/python bench/soak.py [--seconds 300] [--clients 8] [--tenants 4]
Not a test: it takes minutes. Traffic goes to 127.0.0.1 only and stops by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from flexmatch.service import KeyStore

REPO = Path(__file__).resolve().parents[1]
FLEXMATCH = Path(sys.executable).parent / "flexmatch"
WORDS = [
    *("harbour", "orchard", "ledger", "turbine", "glacier", "meadow", "lantern", "quarry"),
    *("falcon", "compass", "saffron", "basalt", "willow", "copper", "tundra", "velvet"),
    *("prism", "anchor", "bramble", "cobalt"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def page_server(pages: int) -> tuple[ThreadingHTTPServer, str]:
    class Pages(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True

        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:
            number = int(self.path.strip("/").split("-")[-1] or 0) % pages
            words = " ".join(WORDS[(number + i) % len(WORDS)] for i in range(12))
            body = (
                f"<html><head><title>Page {number}</title></head><body><h1>Page {number}</h1>"
                f"<p>This page {number} is about {words}.</p></body></html>"
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@dataclass
class Tenant:
    name: str
    token: str
    marker: str  # a word only this tenant's documents contain
    expected: dict[str, str] = field(default_factory=dict)  # document id → latest content tag
    gone: set[str] = field(default_factory=set)
    jobs: list[str] = field(default_factory=list)  # accepted, not yet looked at
    uploads: set[str] = field(default_factory=set)  # ids only this tenant can have
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, dict[int, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, operation: str, status: int, seconds: float) -> None:
        with self.lock:
            self.latencies[operation].append(seconds * 1000)
            self.statuses[operation][status] += 1


def client_loop(
    base: str, pages: str, tenants: list[Tenant], stats: Stats, deadline: float, seed: int
) -> None:
    rng = random.Random(seed)
    counter = 0
    with httpx.Client(base_url=base, timeout=120) as client:
        while time.monotonic() < deadline:
            tenant = rng.choice(tenants)
            headers = {"Authorization": f"Bearer {tenant.token}"}
            operation = rng.choices(
                ["search", "upload", "url", "put", "delete"], weights=[50, 20, 10, 12, 8]
            )[0]
            counter += 1
            tag = f"v{seed}x{counter}"
            started = time.perf_counter()
            if operation == "search":
                words = " ".join(rng.sample(WORDS, 2))
                response = client.post(
                    "/v1/search", json={"query": f"{tenant.marker} {words}"}, headers=headers
                )
            elif operation == "upload":
                name = f"note-{seed}-{counter}.md"
                text = f"# Note {tag}\n\n{tenant.marker} {tag} {' '.join(rng.sample(WORDS, 6))}.\n"
                response = client.post(
                    "/v1/documents", files=[("files", (name, text.encode()))], headers=headers
                )
                if response.status_code == 202:
                    with tenant.lock:
                        tenant.jobs.append(response.json()["job_id"])
            elif operation == "url":
                url = f"{pages}/{tenant.name}-{seed}-page-{counter}"  # never imported twice
                response = client.post("/v1/documents/url", json={"urls": [url]}, headers=headers)
                if response.status_code == 202:
                    with tenant.lock:
                        tenant.jobs.append(response.json()["job_id"])
            else:
                harvest(client, tenant, limit=3)
                with tenant.lock:
                    candidates = sorted(tenant.expected)
                if not candidates:
                    continue
                document_id = rng.choice(candidates)
                if operation == "put":
                    text = f"# Changed {tag}\n\n{tenant.marker} {tag} replaced the text.\n"
                    response = client.put(
                        f"/v1/documents/{document_id}",
                        files={"file": ("changed.md", text.encode())},
                        headers=headers,
                    )
                    if response.status_code == 200:
                        with tenant.lock:
                            if document_id not in tenant.gone:
                                tenant.expected[document_id] = tag
                else:
                    response = client.delete(f"/v1/documents/{document_id}", headers=headers)
                    if response.status_code == 200:
                        with tenant.lock:
                            tenant.expected.pop(document_id, None)
                            tenant.gone.add(document_id)
            stats.record(operation, response.status_code, time.perf_counter() - started)


def harvest(client: httpx.Client, tenant: Tenant, limit: int | None = None) -> None:
    """Look at accepted jobs (oldest first): what a finished one stored is an acknowledged
    write; ``limit`` bounds how many are looked at, without waiting."""
    headers = {"Authorization": f"Bearer {tenant.token}"}
    with tenant.lock:
        pending = list(tenant.jobs if limit is None else tenant.jobs[:limit])
    for job_id in pending:
        while True:
            job = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
            if job["status"] in ("done", "failed") or limit is not None:
                break
            time.sleep(0.2)
        if job["status"] not in ("done", "failed"):
            continue
        with tenant.lock:
            if job_id not in tenant.jobs:  # another client looked at it meanwhile
                continue
            tenant.jobs.remove(job_id)
            for outcome in job["documents"]:
                document_id = outcome["document_id"]
                if outcome["outcome"] in ("added", "changed") and document_id:
                    if outcome["input"].startswith("note-"):
                        tenant.uploads.add(document_id)
                    if document_id not in tenant.gone:
                        tenant.expected.setdefault(document_id, "")


def audit(client: httpx.Client, tenants: list[Tenant]) -> list[str]:
    problems: list[str] = []
    for tenant in tenants:
        headers = {"Authorization": f"Bearer {tenant.token}"}
        for document_id, tag in tenant.expected.items():
            response = client.get(f"/v1/documents/{document_id}", headers=headers)
            if response.status_code != 200:
                problems.append(f"{tenant.name}: acknowledged {document_id} is missing")
            elif tag and tag not in json.dumps(response.json()):
                problems.append(f"{tenant.name}: {document_id} lost its latest content {tag}")
        for document_id in tenant.gone:
            if client.get(f"/v1/documents/{document_id}", headers=headers).status_code != 404:
                problems.append(f"{tenant.name}: deleted {document_id} is still there")
        for other in tenants:
            if other is tenant:
                continue
            other_headers = {"Authorization": f"Bearer {other.token}"}
            for document_id in sorted(tenant.uploads)[:50]:  # a page is each tenant's own copy
                seen = client.get(f"/v1/documents/{document_id}", headers=other_headers)
                if seen.status_code != 404 or tenant.marker in seen.text:
                    problems.append(f"{other.name} sees {tenant.name}'s {document_id}")
            found = client.post(
                "/v1/search", json={"query": tenant.marker}, headers=other_headers
            ).json()
            if any(tenant.marker in r["content"] for r in found["results"]):
                problems.append(f"{other.name} finds {tenant.name}'s marker in a search")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--tenants", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="flexmatch-soak-"))
    kb = work / "kb"
    kb.mkdir()
    (kb / "flexmatch.yaml").write_text(
        "sources:\n  default:\n    allow_hosts: ['127.0.0.1']\n", encoding="utf-8"
    )
    keys = KeyStore.for_kb(kb)
    tenants = [
        Tenant(f"t{i}", keys.create(f"t{i}", "read,write")[1], marker=f"zq{i}marker")
        for i in range(args.tenants)
    ]
    pages, pages_url = page_server(200)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    server = subprocess.Popen(
        [str(FLEXMATCH), "serve", "--kb", str(kb), "--port", str(port), "--rate", "0",
         "--log-level", "warning"],
        env=env,
    )  # fmt: skip
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            for _ in range(600):
                try:
                    if client.get("/health/ready").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            stats = Stats()
            started = time.monotonic()
            deadline = started + args.seconds
            threads = [
                threading.Thread(
                    target=client_loop, args=(base, pages_url, tenants, stats, deadline, seed)
                )
                for seed in range(args.clients)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started
            for tenant in tenants:
                harvest(client, tenant)
            problems = audit(client, tenants)
    finally:
        server.terminate()
        server.wait(timeout=30)
        pages.shutdown()
    total = sum(len(v) for v in stats.latencies.values())
    server_errors = sum(n for s in stats.statuses.values() for code, n in s.items() if code >= 500)
    print(f"soak: {args.clients} clients, {args.tenants} tenants, {elapsed:.0f} s, "
          f"{total} requests ({total / elapsed:.1f}/s), {server_errors} 5xx")  # fmt: skip
    print(f"{'operation':<10}{'requests':>10}{'p50 ms':>10}{'p95 ms':>10}  statuses")
    for operation, values in sorted(stats.latencies.items()):
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        codes = dict(sorted(stats.statuses[operation].items()))
        print(
            f"{operation:<10}{len(values):>10}{statistics.median(ordered):>10.0f}{p95:>10.0f}  "
            f"{codes}"
        )
    acknowledged = sum(len(t.expected) + len(t.gone) for t in tenants)
    print(f"audit: {acknowledged} acknowledged writes checked, {len(problems)} problems")
    for problem in problems[:20]:
        print("  " + problem)
    sys.exit(1 if problems or server_errors else 0)


if __name__ == "__main__":
    main()
