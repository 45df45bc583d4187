"""Shared fixtures: the real local embedding model (loaded once), a real fake LLM
server on 127.0.0.1, and the test data: the sample documents in ``tests/data/docs``, and
the larger data sets in ``../shared/data`` beside the clone (see ``shared_set``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.testing import FakeLLMServer
from tests import tiers

# The property tests are deterministic in CI (same examples every run); set
# HYPOTHESIS_PROFILE=explore to let them search afresh, and longer, on a developer's machine.
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(PROFILE)


def examples(ci: int, explore: int) -> int:
    """A property test's example count: ``ci`` in the suite, where the examples are the
    same every run (more of them reach no new branch), ``explore`` under
    HYPOTHESIS_PROFILE=explore, where each run searches afresh."""
    return explore if PROFILE == "explore" else ci


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier (``slow``, ``browser``, ...): see ``tests/tiers.py``."""
    tiers.apply(items)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Modules that ``-m`` leaves out whole are not imported at all (see ``tests/tiers.py``)."""
    skip = tiers.left_out(collection_path, config.rootpath, config.option.markexpr)
    return True if skip else None  # None, not False: let --ignore and the rest decide


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tiers.note(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    tiers.summary(terminalreporter)  # quick tests that were not quick


REPO = Path(__file__).resolve().parents[1]
# The Apache-2.0 sample documents (PDF, Word, HTML, ...): in the repository, with their
# licence and MANIFEST.tsv (where each came from)
DOCS = REPO / "tests" / "data" / "docs"
# Data sets too large, or not ours, to ship (BEIR-format SciFact, SQuAD dev): a folder
# ``shared`` beside the clone, found from the repository, not the working directory
SHARED_DATA = REPO.parent / "shared" / "data"
SHARED_SETS = {"scifact": "BEIR SciFact", "squad-dev": "SQuAD dev (BEIR format)"}
REQUIRE_SHARED = "FLEXMATCH_REQUIRE_SHARED"  # .ci/run sets it: CI has ../shared
FLEXMATCH = Path(sys.executable).parent / "flexmatch"


def run(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real ``flexmatch`` command, as a user runs it."""
    base = {k: v for k, v in os.environ.items() if k != "FLEXMATCH_KB"}
    # wide enough that no message wraps inside a tmp path (pytest-xdist makes them longer)
    merged = {**base, "COLUMNS": "250", **(env or {})}
    return subprocess.run(
        [str(FLEXMATCH), *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=merged,
        timeout=300,
    )


@contextmanager
def held_store(kb_dir: Path) -> Iterator[subprocess.Popen[str]]:
    """The knowledge base's embedded store held open by another process (as a second
    ``flexmatch`` would hold it) until the block ends; yields that process."""
    shard = kb_dir / ".flexmatch" / "qdrant" / "shard"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, qdrant_edge; shard = qdrant_edge.EdgeShard.load(sys.argv[1]); "
            "print('held', flush=True); sys.stdin.read()",
            str(shard),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.communicate("", timeout=30)


def stop(process: subprocess.Popen[str]) -> None:
    """Stop a server a test started: politely, then for sure."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def shared_set(name: str, root: Path = SHARED_DATA) -> Path:
    """The data set ``name`` in ``../shared/data``. Without it the test skips, saying
    where it looked, so a clone runs everything else; with ``FLEXMATCH_REQUIRE_SHARED=1``
    (CI) it fails instead, so no test goes unrun there unnoticed."""
    path = root / name
    if path.is_dir():
        return path
    reason = f"{SHARED_SETS[name]} not found at {path} (CI provides it)"
    if os.environ.get(REQUIRE_SHARED, "") not in ("", "0"):
        pytest.fail(f"{reason}; {REQUIRE_SHARED} is set", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def squad_dev() -> Path:
    """The SQuAD dev set in BEIR format (a fixture, so a skip names the test)."""
    return shared_set("squad-dev")


@pytest.fixture(scope="session")
def docs_dir() -> Path:
    return DOCS


@pytest.fixture(scope="session")
def embedder() -> OnnxEmbedder:
    """The offline default model, as knowledge bases use it (loaded once per run)."""
    model = OnnxEmbedder()
    assert model.dimension == 384
    return model


@pytest.fixture(scope="session")
def _llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def llm_server(_llm_server: FakeLLMServer) -> FakeLLMServer:
    _llm_server.reset()
    return _llm_server


@pytest.fixture
def fresh_plugins() -> Iterator[None]:
    """Every plug-in hook loads again (after the test has put plug-ins on the path), and
    again after it, so no test's plug-ins leak into the next."""
    from flexmatch import plugins

    plugins.reset()
    yield
    plugins.reset()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty database (its SQLAlchemy URL) on the PostgreSQL server
    ``scripts/postgres`` runs, dropped afterwards; the test skips without that server."""
    from tests.postgres import fresh_database

    with fresh_database() as url:
        yield url


def write_config(kb_dir: Path, text: str) -> Path:
    kb_dir.mkdir(parents=True, exist_ok=True)
    path = kb_dir / "flexmatch.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def llm_config(server: FakeLLMServer, extra: str = "") -> str:
    """A knowledge-base config that sends every LLM chain to the fake server."""
    return (
        "models:\n"
        "  llm: openai/fake-model\n"
        f"  llm_api_base: {server.base_url}\n"
        "  llm_api_key: test-key\n"
        "  llm_retry_delay: 0.01\n"
        "  llm_max_retries: 3\n" + extra
    )


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built as a wheel, once per test run."""
    out = tmp_path_factory.mktemp("wheel")
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run(
        [*build, "-w", str(out), str(REPO)], check=True, capture_output=True, timeout=300
    )
    (built,) = out.glob("flexmatch-*.whl")
    return built


def run_installed(wheel: Path, folder: Path, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by Python in ``folder`` with only the installed ``wheel`` importable
    as ``flexmatch`` (outside this checkout); the wheel goes to ``folder/site``."""
    target = folder / "site"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target"]
    subprocess.run(
        [*install, str(target), str(wheel)], check=True, capture_output=True, timeout=300
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        timeout=120,
    )
