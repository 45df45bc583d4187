"""A real ``flexmatch serve`` on 127.0.0.1 and a headless Chromium driven by Playwright,
for the console's end-to-end tests and for ``scripts/screenshots``.

The server is the real command in a subprocess (its own event loop, its own embedded
store), with the LLM chains sent to ``FakeLLMServer`` under a model name litellm can
price, so imports write questions and jobs report a cost. Chromium is Debian's
``/usr/bin/chromium`` (``$FLEXMATCH_CHROMIUM`` overrides it): Playwright cannot
download browsers here, and ``.ci/run`` installs the package when it is missing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from flexmatch.service import KeyStore
from tests.conftest import stop

FLEXMATCH = Path(sys.executable).parent / "flexmatch"
CHROMIUM = os.environ.get("FLEXMATCH_CHROMIUM", "/usr/bin/chromium")
TIMEOUT_MS = 20_000  # the longest any browser wait may take


def config_text(llm_base_url: str | None) -> str:
    """Two sources (files, and web pages allowed from 127.0.0.1) and, given a fake LLM
    server, every LLM chain sent to it as gpt-4o-mini (priced by litellm's cost map)."""
    models = (
        "models:\n"
        "  llm: openai/gpt-4o-mini\n"
        f"  llm_api_base: {llm_base_url}\n"
        "  llm_api_key: test-key\n"
        "  llm_retry_delay: 0.01\n"
        "  llm_max_retries: 2\n"
        if llm_base_url
        else ""
    )
    return (
        models + "sources:\n"
        "  default: {}\n"
        "  web:\n"
        "    type: web\n"
        '    allow_hosts: ["127.0.0.1"]\n'
        "    timeout: 10\n"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Console:
    """A running server: its address, knowledge base, key store and named keys."""

    url: str
    kb_dir: Path
    keys: KeyStore
    process: subprocess.Popen[str]
    tokens: dict[str, str] = field(default_factory=dict)

    def key(self, name: str, tenant: str, permissions: str) -> str:
        _, token = self.keys.create(tenant, permissions, name)
        self.tokens[name] = token
        return token

    def api(self, token: str) -> httpx.Client:
        """An HTTP API client with ``token`` (for seeding and checking, not the console)."""
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )

    def upload(self, token: str, *files: tuple[str, bytes], source: str = "default") -> dict:
        """Import files through the REST API and wait for the job; its final state."""
        with self.api(token) as client:
            sent = [("files", (name, data)) for name, data in files]
            response = client.post("/v1/documents", files=sent, data={"source": source})
            assert response.status_code == 202, response.text
            return self.wait(client, response.json()["job_id"])

    @staticmethod
    def wait(client: httpx.Client, job_id: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            job = client.get(f"/v1/jobs/{job_id}").json()
            if job["status"] in ("done", "failed"):
                return dict(job)
            assert time.monotonic() < deadline, f"job {job_id} still {job['status']}"
            time.sleep(0.1)


@contextmanager
def running_console(kb_dir: Path, config: str, *, rate: float = 200.0) -> Iterator[Console]:
    """``flexmatch serve`` over ``kb_dir`` (written with ``config``) until the block ends."""
    kb_dir.mkdir(parents=True, exist_ok=True)
    (kb_dir / "flexmatch.yaml").write_text(config, encoding="utf-8")
    port = free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYDANTIC_DISABLE_PLUGINS": "__all__",
    }
    env.pop("FLEXMATCH_KB", None)
    log = (kb_dir.parent / f"serve-{port}.log").open("w", encoding="utf-8")
    process = subprocess.Popen(
        [
            str(FLEXMATCH),
            "serve",
            "--kb",
            str(kb_dir),
            "--port",
            str(port),
            "--rate",
            str(rate),
            "--burst",
            "200",
            "--log-level",
            "warning",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        with httpx.Client(base_url=url, timeout=5) as client:
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"flexmatch serve exited: {_tail(log.name)}")
                try:
                    if client.get("/health/ready").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"flexmatch serve never became ready: {_tail(log.name)}")
                time.sleep(0.2)
        yield Console(url=url, kb_dir=kb_dir, keys=KeyStore.for_kb(kb_dir), process=process)
    finally:
        stop(process)
        log.close()


def _tail(path: str, lines: int = 20) -> str:
    return "\n".join(Path(path).read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


# -- the browser -------------------------------------------------------------------------
def chromium_missing() -> str | None:
    """Why the browser tests cannot run, or None."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright is not installed: pip install -e '.[dev]'"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return (
            f"Chromium is not installed at {CHROMIUM}: apt-get install -y chromium "
            "(./scripts/test does this), or set FLEXMATCH_CHROMIUM to its path"
        )
    return None


def launch(playwright: Any) -> Any:
    """Headless Chromium from the system package (never a downloaded one)."""
    return playwright.chromium.launch(
        executable_path=CHROMIUM,
        args=["--no-sandbox", "--disable-dev-shm-usage"],
        headless=True,
    )


def sign_in(page: Any, console: Console, token: str) -> None:
    page.goto(f"{console.url}/console/signin")
    page.get_by_label("API key").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console.url}/console/")


# -- files -------------------------------------------------------------------------------
HARBOUR = (
    "# Harbour notes\n\n## Cats\n\nThe lighthouse keeper feeds the harbour cats at seven "
    "every morning, with sardines from the night boats.\n\n## Ferries\n\nThe red ferry "
    "leaves the north pier at noon on weekdays and at ten on Sundays.\n"
)
GARDEN = (
    "# Garden\n\nThe spare key to the tool shed is under the blue pot beside the shed "
    "door. The tomatoes are watered every evening in summer.\n"
)
ORCHARD = (
    "# Orchard\n\n## Apples\n\nThe old orchard has forty apple trees; the Bramleys are "
    "picked in the first week of October.\n"
)
TIDES = (
    "# Tide table\n\nHigh water at the harbour mouth is two hours later than at the "
    "estuary. Spring tides come two days after the full moon.\n"
)
PAGE = (
    "<html><head><title>Moorings guide</title></head><body><nav>Home</nav><main>"
    "<h1>Moorings guide</h1><p>Visiting yachts moor on the pontoon by the fuel berth; the "
    "harbour master collects fees at eight.</p></main></body></html>"
)
BROKEN_PDF = b"%PDF-1.4 this is not really a PDF"
