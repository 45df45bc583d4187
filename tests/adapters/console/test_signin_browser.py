"""Login CSRF by cookie tossing, played for real in headless Chromium.

The attacker's page is served from another port of 127.0.0.1: the same site as the
console (cookies do not tell ports apart), as a sibling subdomain would be. It sets the
sign-in form's cookie with a token of its own and posts the form with the attacker's
key. Before the console checked where forms come from, this signed the victim into the
attacker's tenant; now it is refused, and the victim's session stays as it was.

A second page tosses the session cookie itself: the attacker signed in (from another
address) and sets ``fm_console`` to that session, overwriting the victim's. No form is
posted, so no origin check runs; the session works only from the address it signed in
from, so the victim is signed out, not put into the attacker's tenant.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from flexmatch import KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore
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

TOSS_SESSION = """<!doctype html>
<script src="/go.js"></script>
"""


class TossingServer:
    """The attacker's server on another port of 127.0.0.1: its page's response sets
    ``fm_console`` (same name and path, so it overwrites the victim's HttpOnly cookie,
    which a script could not), then the page opens the console."""

    def __init__(self, session: str, console: str) -> None:
        self.session = session
        self.console = console
        self._httpd: ThreadingHTTPServer | None = None

    def __enter__(self) -> TossingServer:
        cookie = f"fm_console={self.session}; Path=/console; HttpOnly; SameSite=Strict"
        script = f'location.href = "{self.console}/console/";'.encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = script if self.path == "/go.js" else TOSS_SESSION.encode()
                self.send_response(200)
                kind = "text/javascript" if self.path == "/go.js" else "text/html"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                if self.path != "/go.js":
                    self.send_header("Set-Cookie", cookie)
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/"


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


def attackers_session(url: str, key: str) -> str:
    """The attacker signs in with their own key, from their own address (127.0.0.2)."""
    transport = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(base_url=url, transport=transport, timeout=30) as client:
        page = client.get("/console/signin")
        token = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert token
        data = {"csrf": token.group(1), "api_key": key, "next": "/console/"}
        assert client.post("/console/signin", data=data).status_code == 303
        session = client.cookies.get("fm_console")
        assert session and 'data-testid="tenant">b<' in client.get("/console/").text
        return session


def test_a_sibling_page_tossing_the_session_cookie_signs_the_victim_out_not_in(
    served: tuple[str, str, str],
) -> None:
    missing = chromium_missing()
    if missing is not None:
        pytest.fail(f"this browser test needs Chromium and Playwright: {missing}")
    url, victim_key, attacker_key = served
    tossed = attackers_session(url, attacker_key)
    with (
        TossingServer(tossed, url) as evil,
        sync_playwright() as playwright,
    ):
        browser = launch(playwright)
        context = browser.new_context()
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto(f"{url}/console/signin")
        page.get_by_label("API key").fill(victim_key)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{url}/console/")
        expect(page.get_by_test_id("tenant")).to_have_text("a", timeout=TIMEOUT_MS)

        page.goto(evil.url)  # tosses the attacker's session in, then opens the console
        page.wait_for_url(lambda address: address.startswith(f"{url}/console/"))
        page.wait_for_load_state()
        shown = page.get_by_test_id("tenant")
        assert shown.count() == 0, f"the victim was put into tenant {shown.inner_text()}"
        assert page.url.startswith(f"{url}/console/signin")  # signed out
        cookies = [c for c in context.cookies() if c["name"] == "fm_console"]
        assert [c["value"] for c in cookies] == [tossed]  # the toss itself worked
        page.goto(f"{url}/console/import")
        page.wait_for_url(lambda address: address.startswith(f"{url}/console/signin"))
        browser.close()
