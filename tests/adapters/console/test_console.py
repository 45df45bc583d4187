"""The web console in a real headless Chromium against a real ``flexmatch serve``.

One server per module (its LLM chains answered by the fake LLM server), one fresh
browser context (no cookies) per test. Every wait is bounded (``TIMEOUT_MS``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flexmatch.testing import FakeLLMServer
from tests.adapters.console.harness import (
    BROKEN_PDF,
    FLEXMATCH,
    GARDEN,
    HARBOUR,
    ORCHARD,
    PAGE,
    TIDES,
    TIMEOUT_MS,
    Console,
    chromium_missing,
    config_text,
    launch,
    running_console,
    sign_in,
)
from tests.adapters.http.servers import PageServer
from tests.conftest import DOCS

if chromium_missing() is None:
    from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)


# -- fixtures ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def console(
    tmp_path_factory: pytest.TempPathFactory, _llm_server: FakeLLMServer
) -> Iterator[Console]:
    folder = tmp_path_factory.mktemp("console")
    config = config_text(_llm_server.base_url) + "query_log:\n  enabled: true\n"
    with running_console(folder / "kb", config) as running:
        admin = running.key("admin", "default", "read,write,admin")
        running.key("reader", "default", "read")
        running.key("writer", "default", "read,write")
        running.key("giver", "default", "read,feedback")
        running.key("other", "globex", "read,write,admin")
        job = running.upload(
            admin, ("harbour.md", HARBOUR.encode()), ("garden.md", GARDEN.encode())
        )
        assert job["counts"]["added"] == 2, job
        pier = running.upload(admin, ("pier.md", PIER), source="web")
        assert pier["counts"]["added"] == 1, pier
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    missing = chromium_missing()
    if missing is not None:
        pytest.fail(f"the console's browser tests need Chromium and Playwright: {missing}")
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(TIMEOUT_MS)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Iterator[Page]:
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(str(error)))
    tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    yield tab
    # a 4xx the test asked for is logged by Chromium as a failed resource; nothing else
    unexpected = [p for p in problems if "status of 4" not in p]
    assert unexpected == [], unexpected


PIER = b"# Pier\n\nThe pier lamps are lit at dusk by the harbour master."


def document_id(console: Console, token: str, title: str) -> str:
    with console.api(token) as client:
        items = client.get("/v1/documents", params={"limit": 500}).json()["items"]
    return next(item["id"] for item in items if item["title"] == title)


def csrf_of(page: Page) -> str:
    value = page.locator('form[action="/console/signout"] input[name="csrf"]').get_attribute(
        "value"
    )
    assert value
    return value


def session_cookie(context: BrowserContext) -> dict[str, Any]:
    return next(dict(c) for c in context.cookies() if c["name"] == "fm_console")


# -- signing in --------------------------------------------------------------------------
def test_sign_in_with_a_key_sets_a_strict_http_only_session(
    console: Console, page: Page, context: BrowserContext
) -> None:
    page.goto(f"{console.url}/console/documents")
    expect(page).to_have_url(re.compile(r"/console/signin\?next=%2Fconsole%2Fdocuments$"))
    page.get_by_label("API key").fill("fm_000000000000_not-a-real-secret")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")

    page.get_by_label("API key").fill(console.tokens["admin"])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{console.url}/console/documents")  # back where it was going
    expect(page.get_by_test_id("tenant")).to_have_text("default")
    cookie = session_cookie(context)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    assert console.tokens["admin"] not in json.dumps(context.cookies())  # the key stays home


def test_keyboard_alone_signs_in_and_moves_around(console: Console, page: Page) -> None:
    page.goto(f"{console.url}/console/signin")
    # the page puts the focus in the key field by itself; typing before it has (a loaded
    # machine) lost the first characters of the key
    expect(page.get_by_label("API key")).to_be_focused()
    page.keyboard.type(console.tokens["admin"])
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{console.url}/console/")
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent.trim()") == "Search":
            break
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{console.url}/console/search")
    page.keyboard.press("Tab")  # the skip link comes first, and works
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "s-q"
    page.keyboard.type("Who feeds the harbour cats?")
    page.keyboard.press("Enter")
    expect(page.locator(".result").first).to_contain_text("Harbour notes")


# -- importing ---------------------------------------------------------------------------
def test_upload_two_good_files_and_a_bad_one_shows_each_outcome(
    console: Console, page: Page
) -> None:
    sign_in(page, console, console.tokens["admin"])
    page.get_by_role("link", name="Import files").click()
    page.set_input_files(
        "#u-files",
        [
            {"name": "orchard.md", "mimeType": "text/markdown", "buffer": ORCHARD.encode()},
            {"name": "tides.md", "mimeType": "text/markdown", "buffer": TIDES.encode()},
            {"name": "broken.pdf", "mimeType": "application/pdf", "buffer": BROKEN_PDF},
        ],
    )
    rows = page.locator("#upload-list tbody tr")
    expect(rows).to_have_count(3)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(rows.nth(0)).to_have_attribute("data-outcome", "added")
    expect(rows.nth(1)).to_have_attribute("data-outcome", "added")
    expect(rows.nth(2)).to_have_attribute("data-outcome", "failed")
    expect(rows.nth(2).locator(".error")).to_contain_text("broken.pdf: ")
    expect(rows.nth(0)).to_contain_text("matching texts")
    expect(page.locator("#upload-status")).to_contain_text("2 added")
    for row in range(3):
        assert rows.nth(row).locator("progress").get_attribute("value") == "100"

    # dropped files: one the same as a stored one under another name, one already there
    page.get_by_role("button", name="Clear the list").click()
    dropped = page.evaluate_handle(
        """(files) => {
            const data = new DataTransfer();
            for (const f of files) {
                data.items.add(new File([f.text], f.name, {type: "text/markdown"}));
            }
            return data;
        }""",
        [{"name": "orchard-copy.md", "text": ORCHARD}, {"name": "tides.md", "text": TIDES}],
    )
    page.dispatch_event("#drop", "drop", {"dataTransfer": dropped})
    expect(rows).to_have_count(2)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(rows.nth(0)).to_have_attribute("data-outcome", "duplicate")
    expect(rows.nth(0)).to_contain_text("same content as document")
    expect(rows.nth(1)).to_have_attribute("data-outcome", "unchanged")

    page.locator("#upload-job").click()  # the job page says the same
    expect(page.locator("[data-field=status]")).to_have_text("done")
    expect(page.locator("tr[data-outcome=duplicate]")).to_contain_text("orchard-copy.md")


def test_import_works_without_javascript(console: Console, browser: Browser) -> None:
    plain = browser.new_context(java_script_enabled=False)
    plain.set_default_timeout(TIMEOUT_MS)
    try:
        page = plain.new_page()
        sign_in(page, console, console.tokens["writer"])
        page.goto(f"{console.url}/console/import")
        page.set_input_files(
            "#u-files", [{"name": "quay.md", "mimeType": "text/markdown", "buffer": QUAY}]
        )
        page.get_by_role("button", name="Import", exact=True).click()
        expect(page).to_have_url(re.compile(r"/console/jobs/[0-9a-f]+$"))
        for _ in range(100):  # no live updates without a script: the page is reloaded
            if page.locator("[data-field=status]").inner_text() == "done":
                break
            page.wait_for_timeout(100)
            page.reload()
        expect(page.locator("tr[data-outcome=added]")).to_contain_text("quay.md")
    finally:
        plain.close()


QUAY = b"# Quay\n\nThe crane on the east quay lifts twelve tonnes."


def test_import_urls_shows_each_outcome_with_a_refused_address(
    console: Console, page: Page
) -> None:
    with PageServer(PAGE) as site:
        port = site.url.split(":")[2].split("/")[0]
        refused = f"http://localhost:{port}/page.html"  # a loopback name, not allowed
        sign_in(page, console, console.tokens["admin"])
        page.get_by_role("link", name="Import URLs").click()
        page.get_by_label("Source").select_option("web")
        page.get_by_label("URLs, one a line").fill(f"{site.url}\n{refused}\nfile:///etc/passwd")
        page.get_by_role("button", name="Import").click()
        expect(page).to_have_url(re.compile(r"/console/jobs/[0-9a-f]+$"))
        expect(page.locator("[data-field=status]")).to_have_text("done")
        rows = page.locator("[data-field=documents] tr")
        expect(rows).to_have_count(3)
        expect(rows.nth(0)).to_have_attribute("data-outcome", "added")
        expect(rows.nth(1)).to_have_attribute("data-outcome", "failed")
        expect(rows.nth(1)).to_contain_text("loopback")
        expect(rows.nth(2)).to_contain_text("only http and https")
        rows.nth(0).get_by_role("link").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Moorings guide")


# -- reading -----------------------------------------------------------------------------
def test_document_detail_shows_chunks_and_their_questions(console: Console, page: Page) -> None:
    sign_in(page, console, console.tokens["reader"])
    page.get_by_role("link", name="Documents").click()
    rows = page.locator("table.documents tbody tr")
    page.get_by_label("Source").select_option("web")
    page.get_by_role("button", name="Filter").click()
    expect(rows.filter(has_text="Pier")).to_have_count(1)
    assert {row.locator("td").nth(1).inner_text() for row in rows.all()} == {"web"}
    page.get_by_label("Source").select_option("default")
    page.get_by_label("Title, address or id contains").fill("harbour")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("complete")
    page.get_by_label("Title, address or id contains").fill("no such words")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_role("status")).to_contain_text("No document matches these filters.")
    page.get_by_label("Title, address or id contains").fill("harbour")
    page.get_by_role("button", name="Filter").click()
    page.get_by_role("link", name="Harbour notes").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Harbour notes")
    first = page.locator("li.chunk").first
    expect(first.get_by_role("heading", level=3)).to_contain_text("Harbour notes › Cats")
    expect(first.locator(".content")).to_contain_text("lighthouse keeper")
    expect(first.locator(".location")).to_have_text(re.compile(r"lines? \d+(-\d+)?"))
    expect(first.locator(".qualifying")).not_to_have_text("–")
    questions = first.get_by_role("list", name="Questions").get_by_role("listitem")
    assert questions.count() >= 1
    assert all(text.strip().endswith("?") for text in questions.all_inner_texts())

    with page.expect_download() as download:
        page.get_by_role("link", name="Download the original file").click()
    assert Path(download.value.path()).read_bytes() == HARBOUR.encode()


def test_search_shows_the_document_first_with_its_signals_and_facts(
    console: Console, page: Page, context: BrowserContext
) -> None:
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=console.url)
    sign_in(page, console, console.tokens["reader"])
    page.get_by_role("link", name="Search").click()
    page.get_by_label("Query").fill("who feeds the harbour cats")  # the LLM rewrites it
    page.get_by_label("Top N").fill("3")
    page.get_by_role("button", name="Search").click()
    first = page.locator(".result").first
    expect(first.get_by_role("heading", level=3)).to_contain_text("Harbour notes")
    expect(first.locator(".matched")).to_contain_text("cats")
    expect(first.locator(".qualifying")).not_to_be_empty()
    expect(first.locator(".uri")).to_have_text("upload:harbour.md")
    expect(first.locator(".cite code")).to_have_text(re.compile(r"harbour\.md:\d+(-\d+)?"))
    expect(first.locator("dl.signals > div")).to_have_count(7)  # the score, every signal
    expect(page.locator(".result")).to_have_count(3)
    expect(page.locator("form.feedback")).to_have_count(0)  # a read key gives no feedback
    assert page.locator("ol.variants li").count() >= 2  # the query and its LLM rewrite
    facts = page.locator("#facts")
    expect(facts).to_contain_text("lighthouse keeper")
    page.get_by_role("button", name="Copy").click()
    expect(page.locator("[data-copy-status=facts]")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == facts.text_content()

    page.get_by_label("Filters").fill("source=web")  # nothing of the web source matches
    page.get_by_role("button", name="Search").click()
    expect(page.locator(".result").first).not_to_contain_text("Harbour notes")
    page.get_by_label("Filters").fill("uri=upload:harbour.md")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("alert")).to_contain_text("uri")


def test_deep_search_and_context_on_the_search_page(console: Console, page: Page) -> None:
    """Depth and context as the API takes them: a deep search shows what it cost and the
    hop that found each result, an expanded result its neighbours; a bad value is an
    error on the page."""
    sign_in(page, console, console.tokens["reader"])
    page.get_by_role("link", name="Search").click()
    page.get_by_label("Query").fill("who feeds the harbour cats")
    page.get_by_label("Depth").select_option("deep")
    page.get_by_label("Context").select_option("neighbours")
    page.get_by_role("button", name="Search").click()
    expect(page.locator(".deep-cost")).to_contain_text(re.compile(r"\d+ hops?, \d+ search"))
    first = page.locator(".result").first
    expect(first.get_by_role("heading", level=3)).to_contain_text("Harbour notes")
    expect(first.locator(".hop")).to_contain_text("the query itself")
    expect(first.locator("details.context")).to_contain_text("red ferry")  # its neighbour
    expect(page.get_by_label("Depth")).to_have_value("deep")  # the form keeps the choice
    page.goto(f"{console.url}/console/search?q=cats&depth=deeper")
    expect(page.get_by_role("alert")).to_contain_text("depth must be")
    page.get_by_label("Depth").select_option("fast")
    page.get_by_label("Context").select_option("none")
    page.get_by_role("button", name="Search").click()
    expect(page.locator(".result").first).to_be_visible()
    expect(page.locator(".deep-cost")).to_have_count(0)
    expect(page.locator("details.context")).to_have_count(0)


def test_thumbs_on_the_search_page_teach_the_knowledge_base(console: Console, page: Page) -> None:
    asked = "when are the pier lamps lit"
    sign_in(page, console, console.tokens["giver"])
    page.get_by_role("link", name="Search").click()
    page.get_by_label("Query").fill(asked)
    page.get_by_role("button", name="Search").click()
    first = page.locator(".result").first
    expect(first.get_by_role("heading", level=3)).to_contain_text("Pier")
    first.get_by_role("button", name="Helpful", exact=False).first.click()
    expect(page.get_by_role("status").first).to_contain_text("learned matching text")
    expect(page.get_by_label("Query")).to_have_value(asked)  # the same search again
    page.locator(".result").first.get_by_role("heading", level=3).get_by_role("link").click()
    expect(page.locator(".learned").first).to_contain_text("1× helpful")
    expect(page.locator("ul.matching")).to_contain_text(asked)
    page.go_back()
    page.locator(".result").first.get_by_role("button", name="Not helpful").click()
    expect(page.get_by_role("status").first).to_contain_text("moves down")


def test_overview_shows_counts_health_cost_and_the_last_eval(
    console: Console, page: Page, tmp_path: Path
) -> None:
    data = tmp_path / "mini"
    (data / "qrels").mkdir(parents=True)
    docs = [("d1", "Cats", HARBOUR), ("d2", "Keys", GARDEN), ("d3", "Trees", ORCHARD)]
    (data / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs)
    )
    (data / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "Where is the spare key?"}) + "\n"
    )
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    saved = subprocess.run(
        [str(FLEXMATCH), "eval", str(data), "--save-to", str(console.kb_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert saved.returncode == 0, saved.stderr

    sign_in(page, console, console.tokens["admin"])
    holds = page.get_by_role("table", name="Documents, chunks and matching texts per source")
    expect(holds.get_by_role("row", name=re.compile(r"^default"))).to_be_visible()
    expect(page.locator("dd").filter(has_text="gpt-4o-mini")).to_be_visible()
    expect(page.locator(".badge.ok")).to_have_text("ready")
    # the store's size counts every tenant's documents, and another tenant (globex) has
    # keys here: even an admin does not see it (a service of one tenant shows it)
    expect(page.get_by_text("Store size")).to_have_count(0)
    assert page.get_by_test_id("usage-cost").inner_text() != "$0"  # gpt-4o-mini priced
    evaluation = page.locator("section", has=page.get_by_role("heading", name="Last evaluation"))
    expect(evaluation).to_contain_text("mini")
    expect(evaluation.get_by_role("row", name=re.compile(r"^default"))).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    sign_in(page, console, console.tokens["reader"])
    expect(page.get_by_text("Store size")).to_have_count(0)  # the whole store: admins only


# -- tenants, permissions and sessions ---------------------------------------------------
def test_another_tenants_key_sees_none_of_it(console: Console, page: Page) -> None:
    harbour = document_id(console, console.tokens["admin"], "Harbour notes")
    with console.api(console.tokens["admin"]) as client:
        job_id = client.get("/v1/jobs").json()[0]["id"]
    sign_in(page, console, console.tokens["other"])
    expect(page.get_by_test_id("tenant")).to_have_text("globex")
    expect(page.get_by_text("No documents yet.")).to_be_visible()
    page.get_by_role("link", name="Documents").click()
    expect(page.get_by_text("This tenant has no documents yet.")).to_be_visible()
    page.goto(f"{console.url}/console/search?q=Who+feeds+the+harbour+cats%3F")
    expect(page.get_by_text("Nothing matched.")).to_be_visible()
    for path in (
        f"/console/documents/{harbour}",
        f"/console/documents/{harbour}/original",
        f"/console/documents/{harbour}/remove",
        f"/console/jobs/{job_id}",
    ):
        response = page.goto(console.url + path)
        assert response is not None and response.status == 404, path
        expect(page.get_by_role("alert")).to_contain_text("no ")
    page.goto(f"{console.url}/console/chains/edit?source=default&kind=matching_text")
    expect(page.locator("#p-document")).to_have_count(0)  # no chunk of default to preview on
    response = page.context.request.post(
        f"{console.url}/console/api/chains/preview",
        form={"source": "default", "kind": "matching_text", "document": harbour, "template": "x"},
        headers={"X-CSRF-Token": csrf_of(page)},
    )
    assert response.status == 404
    # a prompt file indexes every tenant's documents: another tenant's admin may not save it
    response = page.context.request.post(
        f"{console.url}/console/chains/prompt",
        form={
            "source": "default",
            "kind": "matching_text",
            "template": "x {{ chunks }}",
            "csrf": csrf_of(page),
        },
        headers={"X-CSRF-Token": csrf_of(page)},
    )
    assert response.status == 403


def test_read_only_key_sees_no_import_or_edit_controls_and_gets_403(
    console: Console, page: Page
) -> None:
    harbour = document_id(console, console.tokens["admin"], "Harbour notes")
    with console.api(console.tokens["admin"]) as client:
        before = client.get("/v1/documents").json()["total"]
    sign_in(page, console, console.tokens["reader"])
    nav = page.get_by_role("navigation", name="Console")
    expect(nav.get_by_role("link")).to_have_text(["Overview", "Documents", "Search", "Sources"])
    page.get_by_role("link", name="Documents").click()
    expect(page.get_by_role("link", name=re.compile("^Remove"))).to_have_count(0)
    page.get_by_role("link", name="Harbour notes").click()
    expect(page.get_by_role("link", name=re.compile("^Remove"))).to_have_count(0)
    for path in ("/console/import", "/console/import/url", "/console/chains"):
        response = page.goto(console.url + path)
        assert response is not None and response.status == 403, path
        expect(page.get_by_role("alert")).to_contain_text("does not have the")

    token = csrf_of(page)  # a valid token of this session: the key is what is refused
    request = page.context.request
    posts = [
        ("/console/import", {"multipart": {"csrf": token, "files": _file("sneaky.md")}}),
        ("/console/import/url", {"form": {"csrf": token, "urls": "http://127.0.0.1:9/x"}}),
        (f"/console/documents/{harbour}/remove", {"form": {"csrf": token}}),
        ("/console/chains/prompt", {"form": {"csrf": token, "kind": "matching_text"}}),
        ("/console/chains/reindex", {"form": {"csrf": token, "source": "default"}}),
    ]
    for path, body in posts:
        response = request.post(console.url + path, max_redirects=0, **body)
        assert response.status == 403, (path, response.status)
    with console.api(console.tokens["admin"]) as client:
        assert client.get("/v1/documents").json()["total"] == before
        assert client.get(f"/v1/documents/{harbour}").status_code == 200


def _file(name: str) -> dict[str, Any]:
    return {"name": name, "mimeType": "text/markdown", "buffer": b"# Sneaky\n\nNot allowed."}


def test_sign_out_ends_the_session(
    console: Console, page: Page, context: BrowserContext, browser: Browser
) -> None:
    sign_in(page, console, console.tokens["reader"])
    old = session_cookie(context)
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/console/signin\?signed_out=1$"))
    expect(page.get_by_role("status")).to_have_text("You are signed out.")
    assert all(c["name"] != "fm_console" for c in context.cookies())
    page.goto(f"{console.url}/console/documents")
    expect(page).to_have_url(re.compile(r"/console/signin"))

    replay = browser.new_context()  # the old cookie, replayed: the server ended it
    try:
        replay.add_cookies([old])  # type: ignore[list-item]
        again = replay.new_page()
        again.goto(f"{console.url}/console/documents")
        expect(again).to_have_url(re.compile(r"/console/signin"))
        api = replay.request.get(f"{console.url}/console/api/jobs/x")
        assert api.status == 401
    finally:
        replay.close()


def test_revoking_a_key_ends_its_sessions(console: Console, page: Page) -> None:
    token = console.key("short-lived", "default", "read")
    sign_in(page, console, token)
    key_id = token.split("_")[1]
    assert console.keys.revoke(key_id)
    page.get_by_role("link", name="Documents").click()
    expect(page).to_have_url(re.compile(r"/console/signin\?.*expired=1"))
    expect(page.get_by_role("status")).to_contain_text("no longer valid")


def test_every_post_needs_the_sessions_csrf_token(
    console: Console, page: Page, browser: Browser
) -> None:
    job = console.upload(console.tokens["admin"], ("keep.md", b"# Keep\n\nDo not remove me."))
    kept = job["documents"][0]["document_id"]
    sign_in(page, console, console.tokens["admin"])
    request = page.context.request
    remove = f"{console.url}/console/documents/{kept}/remove"
    for attempt in ({"form": {}}, {"form": {"csrf": "forged"}}, {"headers": {"X-CSRF-Token": "x"}}):
        response = request.post(remove, max_redirects=0, **attempt)  # type: ignore[arg-type]
        assert response.status == 403, attempt
        assert "security token" in response.text()
    preview = request.post(
        f"{console.url}/console/api/chains/preview", form={"kind": "matching_text"}
    )
    assert preview.status == 403 and preview.json()["error"]["code"] == "csrf_failed"
    signout = request.post(f"{console.url}/console/signout", max_redirects=0)
    assert signout.status == 403
    with console.api(console.tokens["admin"]) as client:
        assert client.get(f"/v1/documents/{kept}").status_code == 200
    page.goto(f"{console.url}/console/")  # still signed in: the forged sign-out did nothing
    expect(page.get_by_test_id("tenant")).to_have_text("default")

    stranger = browser.new_context()  # a sign-in posted from elsewhere has no form token
    try:
        response = stranger.request.post(
            f"{console.url}/console/signin",
            form={"api_key": console.tokens["admin"]},
            max_redirects=0,
        )
        assert response.status == 403
        assert all(c["name"] != "fm_console" for c in stranger.cookies())
    finally:
        stranger.close()


def test_remove_a_document_after_confirming(console: Console, page: Page) -> None:
    console.upload(console.tokens["admin"], ("doomed.md", b"# Doomed\n\nThis one goes away."))
    doomed = document_id(console, console.tokens["admin"], "Doomed")
    sign_in(page, console, console.tokens["writer"])
    page.goto(f"{console.url}/console/documents?q=doomed")
    page.get_by_role("link", name="Remove Doomed").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Remove this document?")
    page.get_by_role("link", name="Cancel").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Doomed")
    page.get_by_role("link", name="Remove…").click()
    page.get_by_role("button", name="Remove document").click()
    expect(page.get_by_role("status").first).to_have_text("The document was removed.")
    with console.api(console.tokens["admin"]) as client:
        assert client.get(f"/v1/documents/{doomed}").status_code == 404


# -- quality -----------------------------------------------------------------------------
PAGES = [
    "/console/",
    "/console/documents",
    "/console/import",
    "/console/import/url",
    "/console/search?q=cats",
    "/console/chains",
    "/console/chains/edit?source=default&kind=matching_text",
    "/console/chains/reindex?source=default",
    "/console/sources",
    "/console/gaps",
]
UNLABELLED = """() => [...document.querySelectorAll("input, select, textarea, button")]
    .filter(e => e.type !== "hidden")
    .filter(e => !(e.labels && e.labels.length) && !e.getAttribute("aria-label"))
    .filter(e => !e.getAttribute("aria-labelledby"))
    .filter(e => !(e.tagName === "BUTTON" && e.textContent.trim()))
    .map(e => e.outerHTML.slice(0, 80))"""


def test_every_control_is_labelled_and_a_phone_needs_no_sideways_scroll(
    console: Console, page: Page
) -> None:
    harbour = document_id(console, console.tokens["admin"], "Harbour notes")
    sign_in(page, console, console.tokens["admin"])
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 844})
        for path in [*PAGES, f"/console/documents/{harbour}"]:
            response = page.goto(console.url + path)
            assert response is not None and response.status == 200, path
            assert page.evaluate(UNLABELLED) == [], path
            assert page.locator("h1").count() == 1, path
            scroll = page.evaluate("document.documentElement.scrollWidth")
            assert scroll <= width, f"{path} is {scroll}px wide at {width}px"


def test_an_unknown_console_page_is_a_clear_404(console: Console, page: Page) -> None:
    sign_in(page, console, console.tokens["reader"])
    response = page.goto(f"{console.url}/console/nowhere")
    assert response is not None and response.status == 404
    expect(page.get_by_role("alert")).to_contain_text("no console page")
    response = page.goto(f"{console.url}/console/documents/no-such-document")
    assert response is not None and response.status == 404


# -- gaps --------------------------------------------------------------------------------
def test_gaps_show_what_finds_nothing_good_grouped_with_counts(
    console: Console, page: Page
) -> None:
    sign_in(page, console, console.tokens["admin"])
    page.get_by_role("link", name="Search").click()
    page.get_by_label("Query").fill("recipe for chocolate cake")
    page.get_by_role("button", name="Search").click()
    expect(page.locator(".result").first).to_be_visible()
    with console.api(console.tokens["writer"]) as client:  # the API's searches are logged too
        response = client.post("/v1/search", json={"query": "how to bake a chocolate cake"})
        assert response.status_code == 200, response.text
    page.get_by_role("link", name="Gaps").click()
    row = page.locator("tr.gap").filter(has_text="chocolate cake")
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("count")).to_have_text("2")
    expect(page.get_by_test_id("recent")).to_contain_text("how to bake a chocolate cake")
    golden = page.context.request.get(f"{console.url}/console/gaps/golden.yaml")
    assert golden.status == 200 and golden.headers["content-type"].startswith("application/yaml")
    expect(page.get_by_test_id("log-off")).to_have_count(0)

    browser = page.context.browser
    assert browser is not None
    for token in ("reader", "other"):  # a key without admin; another tenant's admin
        fresh = browser.new_context()
        try:
            tab = fresh.new_page()
            sign_in(tab, console, console.tokens[token])
            response = tab.goto(f"{console.url}/console/gaps")
            assert response is not None
            if token == "reader":
                assert response.status == 403
                expect(tab.get_by_role("link", name="Gaps")).to_have_count(0)
            else:
                assert response.status == 200
                expect(tab.locator("tr.gap").filter(has_text="chocolate")).to_have_count(0)
        finally:
            fresh.close()


# -- sources -----------------------------------------------------------------------------
def test_sync_now_runs_a_source_and_its_last_run_shows(console: Console, page: Page) -> None:
    sign_in(page, console, console.tokens["reader"])
    page.get_by_role("link", name="Sources").click()
    expect(page.get_by_role("row", name=re.compile(r"^web"))).to_be_visible()
    expect(page.get_by_role("button", name="Sync web now")).to_have_count(0)  # admins only
    page.get_by_role("button", name="Sign out").click()

    sign_in(page, console, console.tokens["admin"])
    page.goto(f"{console.url}/console/sources")
    row = page.get_by_role("row", name=re.compile(r"^web"))
    expect(row.get_by_test_id("last-run")).to_contain_text("never")
    row.get_by_role("button", name="Sync web now").click()
    expect(page.get_by_role("status")).to_contain_text("The sync started")
    # the page follows the running sync and shows its result when it ends: a web source
    # without urls cannot list itself, so its sync is skipped, saying what to set
    outcome = page.get_by_role("row", name=re.compile(r"^web")).get_by_test_id("outcome")
    expect(outcome).to_have_text("skipped")
    expect(page.get_by_role("row", name=re.compile(r"^web"))).to_contain_text("urls")
    expect(page.get_by_role("row", name=re.compile(r"^web")).get_by_test_id("cost")).to_have_text(
        "$0"
    )
    with console.api(console.tokens["admin"]) as client:
        [web] = [s for s in client.get("/v1/sources").json() if s["name"] == "web"]
    assert web["last_run"]["outcome"] == "skipped" and web["last_run"]["trigger"] == "request"


# -- chains (last: saving a prompt changes the knowledge base) ---------------------------
def test_chains_edit_a_prompt_with_a_live_preview_save_and_reindex_at_a_cost(
    console: Console, page: Page, _llm_server: FakeLLMServer
) -> None:
    sign_in(page, console, console.tokens["admin"])
    page.get_by_role("link", name="Chains").click()
    table = page.locator("table.chains tbody tr")
    expect(table).to_have_count(6)
    expect(table.nth(1)).to_contain_text("questions")
    section = page.locator("#chain-matching_text")
    section.locator("summary", has_text="YAML").click()
    expect(section.locator("pre").first).to_contain_text("type: questions")
    section.locator("summary", has_text="Prompt").click()
    expect(section.locator("pre").nth(1)).to_contain_text("questions that the chunk answers")

    page.get_by_role("link", name="Edit the matching text prompt questions.j2").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Edit questions.j2")
    preview = page.locator("#preview")
    expect(preview).to_contain_text("<chunk id=")  # the first preview, on load
    page.get_by_label("Document").select_option(label="Harbour notes")
    page.get_by_label("Chunk number").fill("1")
    expect(preview).to_contain_text("red ferry")  # the chosen chunk: Ferries
    template = page.get_by_label("Template")
    original = template.input_value()
    edited = original.replace(
        "Each question must", "Write them as a harbour pilot would ask.\nEach question must"
    )
    template.fill(edited)
    expect(preview).to_contain_text("as a harbour pilot would ask")
    template.fill(original + "{{ nonsense }}")
    expect(page.locator("#preview-status")).to_contain_text("nonsense")  # a clear error
    template.fill(edited)
    expect(preview).to_contain_text("as a harbour pilot would ask")

    calls = _llm_server.calls()
    page.get_by_role("button", name=re.compile("^Ask the LLM")).click()
    expect(page.locator("#llm-output li").first).to_be_visible()
    # what the LLM wrote: the questions, not the sentences indexed beside them
    answers = page.locator("#llm-output li").all_inner_texts()
    assert answers and all(text.strip().endswith("?") for text in answers), answers
    expect(page.locator("#llm-status")).to_contain_text("1 call (")
    assert _llm_server.calls() == calls + 1

    page.get_by_role("button", name="Save prompt").click()
    expect(page).to_have_url(re.compile(r"/console/chains/reindex\?source=default"))
    expect(page.get_by_role("status")).to_have_text("The prompt was saved.")
    saved = (console.kb_dir / "prompts" / "questions.j2").read_text(encoding="utf-8")
    assert "as a harbour pilot would ask" in saved and "\r" not in saved
    with console.api(console.tokens["admin"]) as client:
        total = client.get("/v1/documents", params={"source": "default"}).json()["total"]
    expect(page.get_by_test_id("stale")).to_contain_text(f"{total} of {total} documents")
    assert page.get_by_test_id("estimate").inner_text().startswith("$")

    page.get_by_role("button", name=re.compile(r"^Re-index \d+ documents")).click()
    expect(page).to_have_url(re.compile(r"/console/jobs/[0-9a-f]+$"))
    expect(page.locator("[data-field=status]")).to_have_text("done")
    expect(page.locator("[data-field=count]")).to_have_text(f"{total} of {total} done")
    expect(page.locator("tr[data-outcome=changed]")).to_have_count(total)
    cost = page.locator("[data-field=cost]").inner_text()
    match = re.match(r"(\d+) calls? .* \$(\d+\.\d+)$", cost)
    assert match and int(match[1]) > 0 and float(match[2]) > 0, cost

    page.goto(f"{console.url}/console/chains/reindex?source=default")
    expect(page.get_by_test_id("stale")).to_contain_text(f"0 of {total} documents")
    page.goto(f"{console.url}/console/search?q=Who+feeds+the+harbour+cats%3F")
    expect(page.locator(".result").first).to_contain_text("Harbour notes")


def test_a_pdf_chunk_opens_the_original_at_its_page(console: Console, page: Page) -> None:
    """A chunk of an uploaded PDF links to the original shown in the browser (not saved)
    at the chunk's page; every other original is still a download."""
    pdf = (DOCS / "pdf_list-item-example.pdf").read_bytes()
    job = console.upload(console.tokens["admin"], ("list-items.pdf", pdf))
    assert job["counts"]["added"] == 1, job
    pdf_id = document_id(console, console.tokens["admin"], "Unstructured-test-doc")
    sign_in(page, console, console.tokens["reader"])
    page.goto(f"{console.url}/console/document?id={pdf_id}")
    first = page.locator("li.chunk").first
    expect(first.locator(".location")).to_contain_text(re.compile(r"^pp?\. 1\b"))
    href = first.get_by_role("link", name="open the original at p. 1").get_attribute("href")
    assert href is not None and href.endswith("#page=1") and "view=1" in href
    shown = page.context.request.get(console.url + href.split("#")[0])
    assert shown.status == 200 and shown.headers["content-type"] == "application/pdf"
    assert shown.headers["content-disposition"].startswith("inline") and shown.body() == pdf
    saved = page.context.request.get(f"{console.url}/console/document/original?id={pdf_id}")
    assert saved.headers["content-disposition"].startswith("attachment")
    harbour = document_id(console, console.tokens["admin"], "Harbour notes")
    page_as_pdf = f"{console.url}/console/document/original?id={harbour}&view=1"
    assert (
        page.context.request.get(page_as_pdf)
        .headers["content-disposition"]
        .startswith("attachment")
    )  # an uploaded page never opens as one of the console's
