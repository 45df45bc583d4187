"""A prompt preview is an untrusted template (any tenant's admin may send one): the
sandbox refuses to build a huge value in one step, the console renders it in a worker
process stopped after ``PREVIEW_SECONDS``, and the server keeps answering meanwhile."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from flexmatch.errors import PromptError
from flexmatch.service.previews import PREVIEW_SECONDS
from flexmatch.templates import MAX_REPEAT, PromptTemplate, make_environment, render_bounded
from tests.adapters.http.servers import new_key
from tests.adapters.http.test_stalls import (
    IDLE_WATCH,
    MAX_LATENCY,
    _rss,
    _serving,
    _Watch,
)
from tests.conftest import write_config

NESTED_LOOP = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _render(source: str) -> str:
    return PromptTemplate(Path("p.j2"), source, make_environment()).render()


@pytest.mark.parametrize(
    ("source", "refusal"),
    [
        ("{{ 'x' * 300000000 }}", "repeating 1 item(s) 300000000 times"),
        ("{{ 300000000 * 'x' }}", "repeating 1 item(s) 300000000 times"),
        ("{{ ([0] * 2000) * 1000 }}", "repeating 2000 item(s) 1000 times"),
        ("{{ 9 ** 99999999 }}", "too large for a template"),
        ("{{ 'x'.center(300000000) }}", "larger than a template may pass"),
        ("{{ 'a\\tb'.expandtabs(tabsize=2000000) }}", "larger than a template may pass"),
    ],
)
def test_the_sandbox_refuses_a_huge_value_built_in_one_step(source: str, refusal: str) -> None:
    with pytest.raises(PromptError, match=re.escape(refusal)):
        _render(source)


def test_ordinary_repetition_and_powers_still_render() -> None:
    assert _render("{{ '-' * 3 }}{{ 2 ** 10 }}{{ [1, 2] * 2 }}{{ 'a'.center(5) }}|") == (
        "---1024[1, 2, 1, 2]  a  |"
    )
    assert len(_render(f"{{{{ 'x' * {MAX_REPEAT} }}}}")) == MAX_REPEAT


def test_a_bounded_render_stops_at_its_output_limit() -> None:
    source = "{% for a in range(100000) %}{{ 'word ' * 10 }}{% endfor %}"
    with pytest.raises(PromptError, match="longer than 1,000 characters"):
        render_bounded(source, "p.j2", {}, 1_000)
    assert render_bounded("{{ boundary|length }} {{ q }}", "p.j2", {"q": "hi"}, 100) == "16 hi"


def _admin(kb: Path, tenant: str) -> str:
    return new_key(kb, tenant, "read,write,admin")


def _signed_in(url: str, key: str) -> tuple[httpx.Client, str]:
    """A console session for ``key`` and its CSRF token for the console's API."""
    client = httpx.Client(base_url=url, timeout=60)
    form = CSRF.search(client.get("/console/signin").text)
    assert form
    signed = client.post(
        "/console/signin",
        data={"csrf": form.group(1), "api_key": key, "next": "/console/"},
        headers={"Origin": url, "Sec-Fetch-Site": "same-origin"},
    )
    assert signed.status_code in (200, 303), signed.text[:300]
    page = CSRF.search(client.get("/console/").text)
    assert page, "no CSRF token on the console's page"
    return client, page.group(1)


def test_a_hostile_preview_is_stopped_and_stalls_no_one(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write_config(kb, "sources:\n  default: {}\n")
    key = _admin(kb, "acme")  # any tenant's admin may preview
    with _serving(kb) as (process, client):
        console, csrf = _signed_in(str(client.base_url), key)

        def preview(template: str) -> httpx.Response:
            return console.post(
                "/console/api/chains/preview",
                data={"source": "default", "kind": "query_transform", "template": template},
                headers={"X-CSRF-Token": csrf},
            )

        fine = preview("Rewrite: {{ query }}")
        assert fine.status_code == 200, fine.text
        assert fine.json()["prompt"].startswith("Rewrite: ")

        poller = httpx.Client(base_url=str(client.base_url), timeout=10)
        health = _Watch("/health", lambda _i: poller.get("/health"))
        thread = threading.Thread(target=health.run, daemon=True)
        thread.start()
        try:
            time.sleep(IDLE_WATCH)
            idle = max(health.latencies, default=0.0)
            health.latencies.clear()
            health.started.clear()
            baseline = _rss(process.pid)
            marks = {"nested": time.perf_counter()}
            stopped = preview(NESTED_LOOP)
            marks["huge"] = time.perf_counter()
            took = marks["huge"] - marks["nested"]
            huge = preview("{{ 'x' * 300000000 }}")
            marks["end"] = time.perf_counter()
            grown = _rss(process.pid) - baseline
        finally:
            health.stop.set()
            thread.join(timeout=15)
            poller.close()
        assert stopped.status_code == 422, stopped.text
        message = stopped.json()["error"]["message"]
        assert f"preview took longer than {PREVIEW_SECONDS:g}s" in message, message
        assert took < PREVIEW_SECONDS + 10, f"the stopped preview answered after {took:.1f}s"
        assert huge.status_code == 422 and "repeating 1 item(s)" in huge.text, huge.text
        # the worker that was stopped is replaced: previews go on working
        again = preview("Again: {{ query }}")
        assert again.status_code == 200 and again.json()["prompt"].startswith("Again: ")
        console.close()

    worst = sorted(zip(health.latencies, health.started, strict=True))[-5:]
    when = ", ".join(
        f"{t * 1000:.0f} ms at {s - marks['nested']:+.2f}s" for t, s in worst
    )  # relative to the nested-loop preview's start
    print(f"preview: /health worst {when}; idle worst {idle * 1000:.0f} ms; marks {marks}")
    assert not health.failures, health.failures[:3]
    assert len(health.latencies) >= 20
    assert max(health.latencies) <= MAX_LATENCY + idle, (
        f"/health took {max(health.latencies) * 1000:.0f} ms during the preview"
    )
    assert grown < 100 * 1024 * 1024, f"the server grew by {grown / 2**20:.0f} MB"
