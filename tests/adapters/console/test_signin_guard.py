"""Sign-in guards without a browser: forms only from the console's own origin (login CSRF
by cookie tossing), ``__Host-`` cookies over https, and failed sign-ins throttled with
``Retry-After`` (on a clock the test moves) while valid keys still get in."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import BaseRoute

from flexmatch import KnowledgeBase
from flexmatch.adapters.http import Limits, create_app
from flexmatch.adapters.http.console.web import _origin
from flexmatch.adapters.http.throttle import Throttle
from flexmatch.config import ThrottleConfig
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.service import KeyStore
from tests.adapters.http.servers import UvicornThread
from tests.conftest import write_config

BUDGET = 4
WINDOW = 40.0  # one failure regained every 10 s
SETTINGS = ThrottleConfig(
    failures_per_address=BUDGET, failures_per_key=BUDGET, window_seconds=WINDOW
)
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Console:
    app: FastAPI
    url: str
    keys: KeyStore
    clock: Clock
    alice: str  # tenant a's key
    mallory: str  # tenant b's key: the attacker's own

    def browser(self, address: str = "127.0.0.1") -> httpx.Client:
        transport = httpx.HTTPTransport(local_address=address)
        return httpx.Client(base_url=self.url, transport=transport, timeout=30)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Console]:
    kb_dir = tmp_path_factory.mktemp("signin") / "kb"
    write_config(kb_dir, "sources:\n  default: {}\n")
    kb = KnowledgeBase.open(kb_dir, embedder=embedder, env={})
    app = create_app(kb, limits=Limits(rate_per_second=1_000, burst=1_000))
    keys = KeyStore.for_kb(kb_dir)
    _, alice = keys.create("a", "read,write")
    _, mallory = keys.create("b", "read,write")
    try:
        with UvicornThread(app) as server:
            yield Console(app, server.url, keys, Clock(), alice, mallory)
    finally:
        kb.close()


@pytest.fixture
def fresh(console: Console) -> Console:
    """Budgets all full again, on the test's clock (key ids read from the key store)."""
    keys = console.keys
    console.app.state.service.throttle = Throttle(
        SETTINGS, clock=console.clock, known_ids=lambda: [k.id for k in keys.list()]
    )
    return console


def signin_form(client: httpx.Client) -> str:
    """Open the sign-in page (which sets its cookie); its CSRF token."""
    page = client.get("/console/signin")
    assert page.status_code == 200
    match = CSRF.search(page.text)
    assert match
    return match.group(1)


def sign_in(client: httpx.Client, key: str, **headers: str) -> httpx.Response:
    token = signin_form(client)
    return client.post(
        "/console/signin",
        data={"csrf": token, "api_key": key, "next": "/console/"},
        headers=headers,
    )


def tenant_shown(client: httpx.Client) -> str | None:
    page = client.get("/console/", follow_redirects=False)
    found = re.search(r'data-testid="tenant">([^<]*)<', page.text)
    return found.group(1) if page.status_code == 200 and found else None


def same_origin(url: str) -> dict[str, str]:
    return {"Origin": url, "Sec-Fetch-Site": "same-origin"}


# -- login CSRF --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "http://sub.127.0.0.1.nip.io"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # a sibling subdomain: cookie tossing's home
        {"Origin": "http://evil.example", "Sec-Fetch-Site": "same-origin"},
    ],
)
def test_a_tossed_cookie_and_a_cross_origin_sign_in_leave_the_victim_signed_in(
    fresh: Console, headers: dict[str, str]
) -> None:
    with fresh.browser() as victim:
        assert sign_in(victim, fresh.alice, **same_origin(fresh.url)).status_code == 303
        assert tenant_shown(victim) == "a"
        session = victim.cookies.get("fm_console")
        # the attacker's page tossed a sign-in cookie of its own making and posts its key
        victim.cookies.set("fm_console_signin", "tossed-token", path="/console")
        attack = victim.post(
            "/console/signin",
            data={"csrf": "tossed-token", "api_key": fresh.mallory, "next": "/console/import"},
            headers=headers,
        )
        assert attack.status_code == 403
        assert "only from its own pages" in attack.text and "Traceback" not in attack.text
        assert victim.cookies.get("fm_console") == session
        assert tenant_shown(victim) == "a"  # still tenant a: not signed into b


def test_every_state_changing_console_request_needs_the_console_origin(fresh: Console) -> None:
    with fresh.browser() as victim:
        assert sign_in(victim, fresh.alice, **same_origin(fresh.url)).status_code == 303
        page = victim.get("/console/")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf
        evil = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
        signout = victim.post("/console/signout", data={"csrf": csrf.group(1)}, headers=evil)
        assert signout.status_code == 403 and tenant_shown(victim) == "a"
        preview = victim.post(
            "/console/api/chains/preview",
            json={"chain": "x"},
            headers={**evil, "X-CSRF-Token": csrf.group(1), "Accept": "application/json"},
        )
        assert preview.status_code == 403
        assert preview.json()["error"]["code"] == "cross_origin"
        ok = victim.post(
            "/console/signout", data={"csrf": csrf.group(1)}, headers=same_origin(fresh.url)
        )
        assert ok.status_code == 303 and tenant_shown(victim) is None


def test_a_same_origin_sign_in_works_with_or_without_the_browser_headers(fresh: Console) -> None:
    for headers in (
        same_origin(fresh.url),
        {"Origin": fresh.url},
        {"Sec-Fetch-Site": "none"},  # typed or bookmarked by the user
        {},  # not a browser: the CSRF token alone
    ):
        with fresh.browser() as browser:
            response = sign_in(browser, fresh.alice, **headers)
            assert response.status_code == 303, (headers, response.text[:300])
            assert tenant_shown(browser) == "a"
    with fresh.browser() as browser:  # the same port matters: another one is another origin
        other_port = fresh.url.rsplit(":", 1)[0] + ":1"
        assert sign_in(browser, fresh.alice, Origin=other_port).status_code == 403


def test_over_https_cookies_are_host_prefixed_and_a_plain_one_is_ignored(
    console: Console,
) -> None:
    client = TestClient(console.app, base_url="https://console.example")
    page = client.get("/console/signin")
    cookie = page.headers["set-cookie"]
    assert cookie.startswith("__Host-fm_console_signin=")
    assert "Path=/;" in cookie and "Secure" in cookie and "Domain" not in cookie
    token = CSRF.search(page.text)
    assert token
    # a sibling subdomain can set fm_console_signin, but not the __Host- one
    tossed = TestClient(console.app, base_url="https://console.example")
    tossed.cookies.set("fm_console_signin", "tossed", domain="console.example")
    refused = tossed.post(
        "/console/signin",
        data={"csrf": "tossed", "api_key": console.mallory, "next": "/console/"},
        follow_redirects=False,
    )
    assert refused.status_code == 403 and "expired or was not sent" in refused.text
    signed = client.post(
        "/console/signin",
        data={"csrf": token.group(1), "api_key": console.alice, "next": "/console/"},
        headers={"Origin": "https://console.example"},
        follow_redirects=False,
    )
    assert signed.status_code == 303
    assert signed.headers["set-cookie"].startswith("__Host-fm_console=")


@pytest.mark.parametrize(
    ("sent", "own", "same"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000", True),
        ("HTTP://Console.Example", "http://console.example:80", True),
        ("https://console.example:443", "https://console.example", True),
        ("https://console.example", "http://console.example", False),
        ("http://console.example:8001", "http://console.example:8000", False),
        ("http://sub.console.example", "http://console.example", False),
        ("null", "http://console.example", False),
        ("http://console.example:99999", "http://console.example", False),
    ],
)
def test_origins_compare_by_scheme_host_and_port(sent: str, own: str, same: bool) -> None:
    assert (_origin(sent) == _origin(own)) is same


# -- throttling --------------------------------------------------------------------------
def test_hammering_sign_in_gets_429_with_retry_after_and_valid_keys_still_get_in(
    fresh: Console,
) -> None:
    with fresh.browser() as regular:  # a colleague on the same address, signed in before
        assert sign_in(regular, fresh.alice).status_code == 303
    with fresh.browser() as attacker:
        for n in range(BUDGET):
            wrong = f"fm_{n:012x}_wrong" if n % 2 else "not a key: clé"
            response = sign_in(attacker, wrong)
            assert response.status_code == 401, response.text[:300]
        throttled = sign_in(attacker, "fm_aaaaaaaaaaaa_wrong")
        assert throttled.status_code == 429
        assert throttled.headers["retry-after"] == str(int(WINDOW / BUDGET))
        assert "Too many failed API key checks from this address; retry in 10 s." in (
            throttled.text
        )
        assert "Traceback" not in throttled.text
        # a form too big for a sign-in is refused before it is read
        big = attacker.post("/console/signin", data={"api_key": "x" * 10_000})
        assert big.status_code == 429 and big.headers["retry-after"]
        assert "Too many failed API key checks from this address" in big.text
        # a key never seen here is still checked: its id exists and has no failures
        assert sign_in(attacker, fresh.mallory).status_code == 303
    with fresh.browser() as attacker:  # ... once: a wrong secret there is 429, then refused
        assert sign_in(attacker, fresh.mallory[:16] + "wrong").status_code == 429
        assert sign_in(attacker, fresh.mallory[:16] + "again").status_code == 429
        assert sign_in(attacker, fresh.mallory).status_code == 303  # trusted now
    with fresh.browser() as regular:  # the key signed in before: not slowed
        assert sign_in(regular, fresh.alice).status_code == 303
        assert tenant_shown(regular) == "a"
    with fresh.browser("127.0.0.3") as elsewhere:  # another address: its own budget
        assert sign_in(elsewhere, "fm_aaaaaaaaaaaa_wrong").status_code == 401
    fresh.clock.now += WINDOW / BUDGET  # time moves on: the wrong secret that was let
    with fresh.browser() as attacker:  # through took the address below zero
        assert sign_in(attacker, "fm_aaaaaaaaaaaa_wrong").status_code == 429
    fresh.clock.now += WINDOW / BUDGET  # one more try
    with fresh.browser() as attacker:
        assert sign_in(attacker, "fm_aaaaaaaaaaaa_wrong").status_code == 401
        assert sign_in(attacker, "fm_aaaaaaaaaaaa_wrong").status_code == 429


def test_sign_in_and_the_api_share_one_budget(fresh: Console) -> None:
    with fresh.browser("127.0.0.4") as client:
        for _ in range(BUDGET):
            bad = client.get("/v1/stats", headers={"Authorization": "Bearer fm_000000000000_x"})
            assert bad.status_code == 401
        assert sign_in(client, "fm_000000000000_y").status_code == 429


# -- cookie tossing of the session cookie itself -----------------------------------------
def test_a_tossed_session_cookie_does_not_sign_the_victim_into_the_attackers_tenant(
    fresh: Console,
) -> None:
    """Over plain http another port or a sibling subdomain can set ``fm_console`` to a
    session of the attacker's (no POST, so no origin check). A session works only from
    the address it signed in from, and two session cookies at once mean signed out."""
    with fresh.browser("127.0.0.5") as attacker:
        assert sign_in(attacker, fresh.mallory, **same_origin(fresh.url)).status_code == 303
        tossed = attacker.cookies.get("fm_console")
        assert tossed and tenant_shown(attacker) == "b"
    with fresh.browser() as victim:
        assert sign_in(victim, fresh.alice, **same_origin(fresh.url)).status_code == 303
        own = victim.cookies.get("fm_console")
        assert own
        victim.cookies.set("fm_console", tossed, domain="127.0.0.1", path="/console")
        assert victim.cookies.get("fm_console") == tossed  # overwritten, as a browser does
        assert tenant_shown(victim) is None  # signed out: never tenant b
    with fresh.browser() as neighbour:  # the attacker behind the victim's own address
        assert sign_in(neighbour, fresh.mallory, **same_origin(fresh.url)).status_code == 303
        same_address = neighbour.cookies.get("fm_console")
    for cookies in (
        f"fm_console={own}; fm_console={same_address}",
        f"fm_console={own}; fm_console={tossed}",
    ):
        with fresh.browser() as victim:  # a Domain= or other-path copy next to the own one
            page = victim.get("/console/", headers={"Cookie": cookies})
            assert page.status_code == 303 and "/console/signin" in page.headers["location"]
    with fresh.browser() as victim:
        page = victim.get("/console/", headers={"Cookie": f"fm_console={own}"})
        assert page.status_code == 200  # the victim's own session, alone, still works
    with fresh.browser("127.0.0.5") as attacker:
        page = attacker.get("/console/", headers={"Cookie": f"fm_console={tossed}"})
        assert page.status_code == 200  # a toss does not end the session it carries


def _routes(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route, those of included routers too (FastAPI may include them lazily)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        yield from _routes(included.routes) if included is not None else (route,)


def _post_paths(app: FastAPI) -> list[str]:
    """Every console route that takes a POST, with its path parameters filled in."""
    paths = []
    for route in _routes(app.routes):
        on_console = isinstance(route, APIRoute) and route.path.startswith("/console")
        if on_console and "POST" in route.methods:
            paths.append(re.sub(r"\{[^}]+\}", "some-id", route.path))
    return paths


def test_every_console_post_route_refuses_a_cross_origin_post(fresh: Console) -> None:
    paths = _post_paths(fresh.app)
    for expected in (
        "/console/import",
        "/console/document/remove",
        "/console/chains/prompt",
        "/console/chains/reindex",
        "/console/signin",
        "/console/api/chains/run",
    ):
        assert expected in paths
    with fresh.browser() as victim:
        assert sign_in(victim, fresh.alice, **same_origin(fresh.url)).status_code == 303
        csrf = CSRF.search(victim.get("/console/").text)
        assert csrf
        token = csrf.group(1)
        for path in paths:
            for evil in (
                {"Origin": "http://evil.example"},
                {"Sec-Fetch-Site": "cross-site"},
                {"Referer": "http://evil.example/page"},  # an old browser: Referer only
            ):
                headers = {**evil, "X-CSRF-Token": token}
                if path == "/console/import":  # a multipart upload, as the page sends it
                    response = victim.post(
                        path,
                        data={"csrf": token, "source": "default"},
                        files={"files": ("a.txt", b"hello", "text/plain")},
                        headers=headers,
                    )
                else:
                    response = victim.post(
                        path,
                        data={"csrf": token, "id": "x", "api_key": fresh.mallory},
                        headers=headers,
                    )
                assert response.status_code == 403, (path, evil, response.text[:200])
                assert "only from its own pages" in response.text, (path, evil)
        assert tenant_shown(victim) == "a"
        own = victim.post(
            "/console/signout", data={"csrf": token}, headers={"Referer": f"{fresh.url}/console/"}
        )
        assert own.status_code == 303 and tenant_shown(victim) is None
