"""Screenshots of every console page, for the README: ``scripts/screenshots``.

It runs the same real server as the end-to-end tests (``harness``), with the LLM chains
answered by ``flexmatch.testing.FakeLLMServer`` under the gpt-4o-mini price list,
imports some of ``tests/data/docs`` and a local web page, saves a real
``flexmatch eval`` run on squad-dev (first 200 queries), and photographs each page at
1280 px and a few at 390 px into ``docs/screenshots/``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
from tests.conftest import DOCS, REPO, SHARED_DATA

SEEDED = ["pdf_fake-memo.pdf", "handbook-1p.docx", "example-10k-1p.html", "fake-power-point.pptx"]


def seed(console: Console, token: str) -> None:
    files = [(name, (DOCS / name).read_bytes()) for name in SEEDED]
    files += [("harbour.md", HARBOUR.encode()), ("garden.md", GARDEN.encode())]
    job = console.upload(token, *files)
    assert job["status"] == "done", job


def evaluate(console: Console, dataset: Path, limit: int) -> None:
    if not dataset.is_dir():
        print(f"no {dataset}: the overview shows no eval results", file=sys.stderr)
        return
    subprocess.run(
        [
            *(str(FLEXMATCH), "eval", str(dataset), "--baselines"),
            *("--limit", str(limit), "--save-to", str(console.kb_dir)),
        ],
        check=True,
        timeout=1800,
    )


def shoot(page: Any, out: Path, name: str, full: bool = True) -> None:
    page.wait_for_load_state("networkidle")
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    print(path)


def take(console: Console, token: str, out: Path, page_url: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)
    with sync_playwright() as playwright:
        browser = launch(playwright)
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()

        page.goto(f"{console.url}/console/signin")
        page.get_by_label("API key").fill("fm_")
        shoot(page, out, "01-sign-in", full=False)
        sign_in(page, console, token)

        page.get_by_role("link", name="Import files").click()
        page.set_input_files(
            "#u-files",
            [
                {"name": "orchard.md", "mimeType": "text/markdown", "buffer": ORCHARD.encode()},
                {"name": "tides.md", "mimeType": "text/markdown", "buffer": TIDES.encode()},
                {"name": "garden-copy.md", "mimeType": "text/markdown", "buffer": GARDEN.encode()},
                {"name": "harbour.md", "mimeType": "text/markdown", "buffer": HARBOUR.encode()},
                {"name": "scan.pdf", "mimeType": "application/pdf", "buffer": BROKEN_PDF},
            ],
        )
        page.get_by_role("button", name="Import", exact=True).click()
        expect(page.locator("#upload-status")).to_contain_text("Import done")
        shoot(page, out, "04-import-files")

        page.get_by_role("link", name="Import URLs").click()
        page.get_by_label("Source").select_option("web")
        port = page_url.split(":")[2].split("/")[0]
        page.get_by_label("URLs, one a line").fill(
            f"{page_url}\nhttp://localhost:{port}/page.html\nhttp://10.0.0.7/intranet"
        )
        shoot(page, out, "05-import-urls", full=False)
        page.get_by_role("button", name="Import").click()
        expect(page.locator("[data-field=status]")).to_have_text("done")
        shoot(page, out, "06-url-import-job")

        page.get_by_role("link", name="Overview").click()
        shoot(page, out, "02-overview")

        page.get_by_role("link", name="Documents").click()
        shoot(page, out, "03-documents")

        page.get_by_role("link", name="Harbour notes", exact=True).click()
        shoot(page, out, "07-document")

        page.get_by_role("link", name="Search").click()
        page.get_by_label("Query").fill("who feeds the harbour cats")
        page.get_by_label("Top N").fill("3")
        page.get_by_role("button", name="Search").click()
        expect(page.locator(".result").first).to_be_visible()
        shoot(page, out, "08-search")

        page.get_by_role("link", name="Chains").click()
        shoot(page, out, "09-chains")

        page.get_by_role("link", name="Edit the matching text prompt questions.j2").click()
        page.get_by_label("Document").select_option(label="Harbour notes")
        template = page.get_by_label("Template")
        template.fill(
            template.input_value().replace(
                "Each question must", "Ask them the way a harbour pilot would.\nEach question must"
            )
        )
        expect(page.locator("#preview")).to_contain_text("harbour pilot")
        page.get_by_role("button", name="Ask the LLM").click()
        expect(page.locator("#llm-output li").first).to_be_visible()
        shoot(page, out, "10-prompt-editor")
        page.get_by_role("button", name="Save prompt").click()
        expect(page.get_by_test_id("estimate")).to_be_visible()
        shoot(page, out, "11-reindex-cost")
        page.get_by_role("button", name="Re-index").click()
        expect(page.locator("[data-field=status]")).to_have_text("done")
        shoot(page, out, "12-reindex-job")

        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{console.url}/console/")
        shoot(page, out, "13-phone-overview")
        page.goto(f"{console.url}/console/search?q=who+feeds+the+harbour+cats&top_n=2")
        shoot(page, out, "14-phone-search")
        page.get_by_role("link", name="Documents").click()
        shoot(page, out, "15-phone-documents")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--eval-data", type=Path, default=SHARED_DATA / "squad-dev")
    parser.add_argument("--eval-limit", type=int, default=200)
    args = parser.parse_args()
    missing = chromium_missing()
    if missing:
        sys.exit(f"error: {missing}")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="flexmatch-shots-") as folder,
        FakeLLMServer() as llm,
        PageServer(PAGE) as site,
        running_console(Path(folder) / "kb", config_text(llm.base_url)) as console,
    ):
        token = console.key("console", "default", "read,write,admin")
        seed(console, token)
        evaluate(console, args.eval_data, args.eval_limit)
        take(console, token, args.out, site.url)
    print(f"done in {time.monotonic() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
