"""Inputs at their edges against a real uvicorn server on 127.0.0.1: every bad filter value
is an ``invalid_filter``, ids repeated in one records request fail alone, a BOM is no
error, a long file name does not refuse its batch (API and console), and the console's
links lead to their own document whatever its id."""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from flexmatch import KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.adapters.http.multipart import MAX_PART_HEADER_BYTES
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore, safe_filename
from tests.adapters.http.harness import KB_CONFIG
from tests.adapters.http.servers import UvicornThread, assert_error, auth, wait_for_job
from tests.conftest import write_config

BOM = b"\xef\xbb\xbf"
BOUNDARY = b"edge-boundary-5c1d"


@dataclass
class Server:
    client: httpx.Client
    url: str
    app: Any
    token: str

    def session(self) -> tuple[dict[str, str], dict[str, str]]:
        """A console session for the key: the headers of a page's request, and those of
        a form post (its CSRF token, its origin)."""
        session = self.app.state.console.sessions.create(self.token)
        cookie = {"Cookie": f"fm_console={session.id}"}
        return cookie, {**cookie, "X-CSRF-Token": session.csrf, "Origin": self.url}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Server]:
    kb_dir = tmp_path_factory.mktemp("edges") / "kb"
    write_config(kb_dir, KB_CONFIG)
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    app = create_app(kb, limits=Limits(rate_per_second=1_000, burst=1_000))
    _, token = KeyStore.for_kb(kb_dir).create("edges", "read,write", "edges")
    try:
        with UvicornThread(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
            yield Server(client=c, url=running.url, app=app, token=token)
    finally:
        kb.close()


def job_of(server: Server, response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 202, response.text
    job = wait_for_job(server.client, response.json()["job_id"], server.token)
    assert job["status"] == "done", job
    return list(job["documents"])


def multipart(*parts: tuple[bytes, bytes]) -> bytes:
    """A body built by hand, so a file name goes on the wire exactly as given."""
    body = b""
    for filename, data in parts:
        body += (
            b"--" + BOUNDARY + b"\r\n"
            b'Content-Disposition: form-data; name="files"; filename="' + filename + b'"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n"
        )
    return body + b"--" + BOUNDARY + b"--\r\n"


FORM = {"Content-Type": "multipart/form-data; boundary=" + BOUNDARY.decode()}


# -- filters -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "filters",
    [
        {"metadata.rank": 1.5},
        {"metadata.rank": [1.5]},
        {"metadata.rank": {"nested": {"deeper": 1}}},
        {"metadata.rank": [1, "one"]},
        {"metadata.rank": [True, 1]},
        {"metadata.rank": None},
        {"metadata.rank": []},
        {"metadata.rank": [[1]]},
        {"metadata.rank": json.loads("[" * 300 + "]" * 300)},
        {"metadata.rank": 2**63},
        {"no such field!": "x"},
        {"x" * 100_000: "y"},
        [{"metadata.rank": 1}],
        "metadata.rank=1",
    ],
)
def test_every_bad_filter_value_is_invalid_filter(server: Server, filters: Any) -> None:
    for path, body in (("/v1/search", {"query": "rank"}), ("/v1/search/similar", {"text": "x"})):
        response = server.client.post(
            path, json={**body, "filters": filters}, headers=auth(server.token)
        )
        assert_error(response, 422, "invalid_filter")


def test_good_and_huge_filter_values_are_searched(server: Server) -> None:
    for filters in (
        {"metadata.rank": 7},
        {"metadata.rank": ["a", "b"]},
        {"metadata.rank": "y" * 200_000},  # big, but a string: matches nothing
        {"source": "default", "metadata.flag": True},
    ):
        response = server.client.post(
            "/v1/search", json={"query": "rank", "filters": filters}, headers=auth(server.token)
        )
        assert response.status_code == 200, response.text


# -- ids -----------------------------------------------------------------------------------
def test_ids_repeated_in_one_records_request_fail_alone(server: Server) -> None:
    records = [
        {"fact_id": 10, "subject": "Ann", "prefers": "green tea"},
        {"fact_id": "10", "subject": "Bob", "prefers": "black coffee"},
        {"fact_id": True, "subject": "Cy", "prefers": "water"},
        {"fact_id": {"a": 1}, "subject": "Di", "prefers": "juice"},
        {"fact_id": "True", "subject": "Ed", "prefers": "milk"},
    ]
    response = server.client.post(
        "/v1/records", json={"records": records, "source": "facts"}, headers=auth(server.token)
    )
    outcomes = job_of(server, response)
    assert [o["outcome"] for o in outcomes] == ["added", "failed", "failed", "failed", "added"]
    assert outcomes[1]["error"] == (
        "record:1: id '10' is already used by record:0 in the same request; "
        'ids must be unique (1 and "1" are the same id)'
    )
    assert outcomes[2]["error"].endswith("must be a string or an integer, not a boolean")
    assert outcomes[3]["error"].endswith("must be a string or an integer, not an object")
    assert "{'a'" not in json.dumps(outcomes)  # never a Python repr as an id
    kept = server.client.get("/v1/documents/10", headers=auth(server.token)).json()
    assert kept["document"]["title"] == "Ann"  # the first stayed


def test_ids_repeated_in_an_uploaded_corpus_fail_alone_and_a_bom_is_no_error(
    server: Server,
) -> None:
    rows = [
        {"_id": 7, "title": "Kiln", "text": "The kiln fires clay at 1200 degrees."},
        {"_id": "7", "title": "Loom", "text": "The loom weaves wool into cloth."},
        {"_id": "8", "title": "Lathe", "text": "The lathe turns oak into bowls."},
    ]
    data = BOM + b"\n".join(json.dumps(r).encode() for r in rows) + b"\n"
    response = server.client.post(
        "/v1/documents",
        files=[("files", ("shop.jsonl", data))],
        data={"metadata": "\ufeff" + json.dumps({"shelf": "b"})},  # a BOM here too
        headers=auth(server.token),
    )
    outcomes = job_of(server, response)
    (failed,) = [o for o in outcomes if o["outcome"] == "failed"]
    assert "shop.jsonl:2: id '7' is already used by shop.jsonl:1" in failed["error"], failed
    assert sorted(o["document_id"] for o in outcomes if o["outcome"] == "added") == ["7", "8"]
    seven = "7"
    stored = server.client.get(f"/v1/documents/{seven}", headers=auth(server.token)).json()
    assert stored["document"]["title"] == "Kiln" and stored["document"]["metadata"]["shelf"] == "b"


# -- long file names -------------------------------------------------------------------------
def test_a_5000_character_file_name_does_not_refuse_its_batch(server: Server) -> None:
    shared = "minutes-" + "m" * 400
    names = [
        b"a" * 5_000 + b".md",  # 5,005 bytes: over python-multipart's 4,224-byte header cap
        (shared + "-march.md").encode(),  # these two share their first 200 bytes ...
        (shared + "-april.md").encode(),
        b"plain.md",
    ]
    texts = [
        b"# Long\n\nThe lighthouse keeper logs every ship.\n",
        b"# March\n\nThe committee approved the bridge budget.\n",
        b"# April\n\nThe committee rejected the tunnel plan.\n",
        b"# Plain\n\nThe bakery opens at six.\n",
    ]
    body = multipart(*zip(names, texts, strict=True))
    response = server.client.post(
        "/v1/documents", content=body, headers={**auth(server.token), **FORM}
    )
    outcomes = job_of(server, response)
    assert [o["outcome"] for o in outcomes] == ["added"] * 4, outcomes
    expected = [safe_filename(n.decode()) for n in names]
    assert [o["input"] for o in outcomes] == expected
    assert len({o["document_id"] for o in outcomes}) == 4  # ... and stay two documents
    for outcome, name in zip(outcomes, expected, strict=True):
        assert len(name.encode()) <= 200 and name.endswith(".md")
        got = server.client.get(
            f"/v1/documents/{outcome['document_id']}", headers=auth(server.token)
        )
        assert got.json()["document"]["uri"] == f"upload:{name}"
    # past the raised cap the request is still refused whole: cleanly, not with a 5xx
    huge = multipart((b"z" * (MAX_PART_HEADER_BYTES + 1) + b".md", b"# Huge\n\nx\n"))
    refused = server.client.post(
        "/v1/documents", content=huge, headers={**auth(server.token), **FORM}
    )
    assert_error(refused, 400, "bad_request")


def test_the_console_imports_a_batch_with_a_5000_character_name(server: Server) -> None:
    _, headers = server.session()
    body = multipart(
        (b"b" * 5_000 + b".md", b"# Console long\n\nThe ferry leaves at noon.\n"),
        (b"console-plain.md", b"# Console plain\n\nThe museum closes on Mondays.\n"),
    )
    response = server.client.post(
        "/console/import",
        content=body,
        headers={**headers, **FORM, "Accept": "application/json"},
    )
    assert response.status_code == 202, response.text
    job = wait_for_job(server.client, response.json()["job_id"], server.token)
    assert [o["outcome"] for o in job["documents"]] == ["added", "added"], job


# -- console links -------------------------------------------------------------------------
LINK_IDS = ["a/../b", "b", "..", ".", "x/remove", "x", "q?page=9#frag", "sp ace&amp"]


def test_console_links_lead_to_their_own_document(server: Server) -> None:
    records = [{"fact_id": i, "subject": f"Doc {i}", "body": f"about {i}"} for i in LINK_IDS]
    response = server.client.post(
        "/v1/records", json={"records": records, "source": "facts"}, headers=auth(server.token)
    )
    assert [o["outcome"] for o in job_of(server, response)] == ["added"] * len(LINK_IDS)
    page_headers, _ = server.session()
    listing = server.client.get("/console/documents?source=facts", headers=page_headers)
    assert listing.status_code == 200, listing.text
    hrefs = {
        html.unescape(title): html.unescape(href)
        for href, title in re.findall(
            r'<td class="doc"><a href="([^"]+)">([^<]+)</a>', listing.text
        )
    }
    base = f"{server.url}/console/documents"
    for document_id in LINK_IDS:
        href = hrefs[f"Doc {document_id}"]
        # resolved as a browser resolves it (dot segments and all), then followed
        url = urllib.parse.urljoin(base, href)
        page = server.client.get(url, headers=page_headers)
        assert page.status_code == 200, (document_id, url, page.text[:300])
        shown = re.search(r"<h1[^>]*>(.*?)</h1>", page.text, re.S)
        assert shown and html.unescape(shown.group(1)).strip() == f"Doc {document_id}", url
        link = re.search(r'href="([^"]*/document/remove\?[^"]*)"', page.text)
        assert link, page.text
        target = urllib.parse.urljoin(url, html.unescape(link.group(1)))
        confirm = server.client.get(target, headers=page_headers)  # the removal page asks about it
        assert confirm.status_code == 200, confirm.text
        assert f"<strong>Doc {document_id}</strong>" in html.unescape(confirm.text), target
