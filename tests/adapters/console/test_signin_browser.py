"""Login CSRF by cookie tossing, played for real in headless Chromium.

The attacker's page is served from another port of 127.0.0.1: the same site as the
console (cookies do not tell ports apart), as a sibling subdomain would be. It sets the
sign-in form's cookie with a token of its own and posts the form with the attacker's
key. Before the console checked where forms come from, this signed the victim into the
attacker's tenant; now it is refused, and the victim's session stays as it was.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flexmatch import KeyStore, KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.engine.embeddings import OnnxEmbedder
from tests.adapters.console.harness import TIMEOUT_MS, chromium_missing, launch
from tests.adapters.http.servers import PageServer, UvicornThread
from tests.conftest import write_config

if chromium_missing() is None:
    from playwright.sync_api import expect, sync_playwright

ATTACK = """<!doctype html>
<form id="toss" method="post" action="{console}/console/signin">
  <input name="csrf" value="tossed-token"><input name="api_key" value="{key}">
  <input name="next" value="/console/">
</form>
<script>
  document.cookie = "fm_console_signin=tossed-token; path=/console";
  document.getElementById("toss").submit();
</script>
"""


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[tuple[str, str, str]]:
    """The console's address, the victim's key (tenant a), the attacker's (tenant b)."""
    kb_dir = tmp_path_factory.mktemp("tossing") / "kb"
    write_config(kb_dir, "sources:\n  default: {}\n")
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    keys = KeyStore.for_kb(kb_dir)
    _, victim = keys.create("a", "read")
    _, attacker = keys.create("b", "read,write")
    try:
        app = create_app(kb, limits=Limits(rate_per_second=1_000, burst=1_000))
        with UvicornThread(app) as server:
            yield server.url, victim, attacker
    finally:
        kb.close()


def test_a_sibling_page_tossing_the_sign_in_cookie_cannot_switch_the_victims_tenant(
    served: tuple[str, str, str],
) -> None:
    missing = chromium_missing()
    if missing is not None:
        pytest.fail(f"this browser test needs Chromium and Playwright: {missing}")
    url, victim_key, attacker_key = served
    with (
        PageServer(ATTACK.format(console=url, key=attacker_key)) as evil,
        sync_playwright() as playwright,
    ):
        assert evil.url.split(":")[2] != url.split(":")[2]  # another port, the same site
        browser = launch(playwright)
        context = browser.new_context()
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto(f"{url}/console/signin")
        page.get_by_label("API key").fill(victim_key)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{url}/console/")
        expect(page.get_by_test_id("tenant")).to_have_text("a", timeout=TIMEOUT_MS)
        session = next(c["value"] for c in context.cookies() if c["name"] == "fm_console")

        page.goto(evil.url)  # the attacker's page submits itself at once
        page.wait_for_url(lambda address: address.startswith(f"{url}/console/"))
        page.wait_for_load_state()
        cookies = {c["name"]: c["value"] for c in context.cookies()}
        assert cookies["fm_console"] == session, "the attack replaced the victim's session"
        assert "only from its own pages" in page.content()
        cookies = {c["name"]: c["value"] for c in context.cookies()}
        assert cookies.get("fm_console_signin") == "tossed-token"  # the toss itself worked
        page.goto(f"{url}/console/")
        expect(page.get_by_test_id("tenant")).to_have_text("a", timeout=TIMEOUT_MS)
        browser.close()
