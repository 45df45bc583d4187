"""Test tiers: which tests are too slow to run while working, and why.

``./scripts/test-quick`` runs the quick tier, ``pytest -m "not slow"`` (under a minute on
a 2-core machine); ``./scripts/test`` and CI run every test. ``tests/conftest.py`` applies
these rules at collection, so the tiers live in one place instead of on hundreds of
tests. A test gets a marker from, in turn:

- a fixture it uses (``FIXTURES``): building the wheel, a PostgreSQL database;
- its module (``MODULES``): whole modules that drive Chromium, start ``flexmatch serve``
  or other processes, or run Ray;
- itself (``TESTS``): a slow test in an otherwise quick module.

``browser``, ``postgres`` and ``ray`` each imply ``slow``. A test may also carry a marker
of its own (``@pytest.mark.slow``, a ``pytest.param(..., marks=...)`` case).

When to add a test here: it takes more than about 2 seconds on a 2-core machine (find
them with ``pytest --durations=20``), or needs a service the quick tier does not start.
The quick tier must still reach every module of the package: keep at least one quick
test per module (``tests/test_tiers.py`` checks what it can).
"""

from __future__ import annotations

import pytest

# marker -> what it means; registered in pyproject.toml ([tool.pytest.ini_options]) too
MARKERS = {
    "slow": "seconds or more: real servers, command runs, big ingests, wheel builds",
    "browser": "drives Chromium through Playwright",
    "postgres": "needs the PostgreSQL server scripts/postgres runs",
    "ray": "starts or joins a Ray cluster",
}
IMPLY_SLOW = frozenset({"browser", "postgres", "ray"})

FIXTURES: dict[str, tuple[str, ...]] = {
    "wheel": ("slow",),  # pip builds the package once per run
    "postgres_url": ("postgres",),
}

MODULES: dict[str, tuple[str, ...]] = {
    # Chromium through Playwright
    "tests/adapters/console/test_console.py": ("browser",),
    "tests/adapters/console/test_signin_browser.py": ("browser",),
    # a Ray cluster per test
    "tests/engine/test_fanout.py": ("ray",),
    # PostgreSQL (the tests that use ``postgres_url`` are marked by the fixture too)
    "tests/test_shared_state_postgres.py": ("postgres",),
    "tests/adapters/http/test_replicas_postgres.py": ("postgres",),
    # real ``flexmatch serve`` / ``ingest`` processes, killed, restarted, raced
    "tests/adapters/cli/test_crash.py": ("slow",),
    "tests/adapters/cli/test_serve_lifecycle.py": ("slow",),
    "tests/adapters/cli/test_service_commands.py": ("slow",),
    "tests/adapters/http/test_replicas.py": ("slow",),
    "tests/adapters/http/test_stalls.py": ("slow",),
    "tests/test_deploy.py": ("slow",),
    "tests/test_lifecycle.py": ("slow",),
    # property-based: hundreds of generated requests and documents
    "tests/adapters/http/test_fuzz.py": ("slow",),
}

TESTS: dict[str, tuple[str, ...]] = {}


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _test(nodeid: str) -> str:
    """The node id without its parameters: ``module::test`` or ``module::Class::test``."""
    return nodeid.split("[", 1)[0]


def check_tables(items: list[pytest.Item]) -> None:
    """A ``TESTS`` entry whose module is collected but has no such test is a rename the
    table missed: refused, so the tier cannot rot silently."""
    modules = {_module(item.nodeid): item for item in items if isinstance(item, pytest.Function)}
    missing = []
    for entry in TESTS:
        item = modules.get(_module(entry))
        if item is None:
            continue
        obj: object = item.module
        for part in entry.split("::")[1:]:
            obj = getattr(obj, part, None)
        if obj is None:
            missing.append(entry)
    if missing:
        raise pytest.UsageError(
            "tests/tiers.py names tests that do not exist (renamed?): " + ", ".join(missing)
        )


def markers_for(item: pytest.Item) -> set[str]:
    """The tier markers ``item`` gets from the tables (its own markers aside)."""
    names: set[str] = set()
    for fixture in getattr(item, "fixturenames", ()):
        names.update(FIXTURES.get(fixture, ()))
    names.update(MODULES.get(_module(item.nodeid), ()))
    names.update(TESTS.get(_test(item.nodeid), ()))
    own = {mark.name for mark in item.iter_markers()}
    if (names | own) & IMPLY_SLOW:
        names.add("slow")
    return names - own


def apply(items: list[pytest.Item]) -> None:
    check_tables(items)
    for item in items:
        for name in sorted(markers_for(item)):
            item.add_marker(getattr(pytest.mark, name))
