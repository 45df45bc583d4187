"""The test tiers (``tests/tiers.py``): registered markers, and the rules that assign them,
run on a small suite of their own (``pytester``)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from tests import tiers

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]

SUITE = {
    "test_plain.py": "def test_quick():\n    pass\n\ndef test_heavy():\n    pass\n",
    "test_page.py": "def test_in_chromium():\n    pass\n",
    "test_db.py": "def test_query(postgres_url):\n    pass\n",
    "test_own.py": (
        "import pytest\n\n@pytest.mark.ray\ndef test_on_ray():\n    pass\n\n"
        "@pytest.mark.parametrize(\n"
        "    'store', ['file', pytest.param('pg', marks=pytest.mark.postgres)]\n"
        ")\n"
        "def test_store(store):\n    pass\n"
    ),
}
CONFTEST = """
import pytest
from tests import tiers

def pytest_configure(config):
    for name, meaning in tiers.MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")

@pytest.fixture
def postgres_url():
    return "postgresql://"

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    tiers.apply(items)

def pytest_ignore_collect(collection_path, config):
    skip = tiers.left_out(collection_path, config.rootpath, config.option.markexpr)
    return True if skip else None

def pytest_runtest_logreport(report):
    tiers.note(report)

def pytest_terminal_summary(terminalreporter):
    tiers.summary(terminalreporter)
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setattr(tiers, "MODULES", {"test_page.py": ("browser",)})
    monkeypatch.setattr(tiers, "TESTS", {"test_plain.py::test_heavy": ("slow",)})
    monkeypatch.setattr(tiers, "_overtime", {})  # this run's own slow tests stay out of it
    pytester.makeconftest(CONFTEST)
    for name, text in SUITE.items():
        pytester.makepyfile(**{name.removesuffix(".py"): text})
    return pytester


def _selected(suite: pytest.Pytester, expression: str) -> set[str]:
    result = suite.runpytest_inprocess("--strict-markers", "-q", "-m", expression, "--co")
    return {line for line in result.outlines if "::" in line}


def test_the_quick_tier_leaves_out_every_slow_kind(suite: pytest.Pytester) -> None:
    assert _selected(suite, "not slow") == {
        "test_plain.py::test_quick",
        "test_own.py::test_store[file]",
    }


def test_a_module_left_out_whole_is_not_even_imported(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_page="raise RuntimeError('imported')\n")  # marked browser, whole
    quick = suite.runpytest_inprocess("-m", "not slow", "--co").parseoutcomes()
    assert "error" not in quick and "errors" not in quick
    assert quick["deselected"] == 4  # the other slow tests: collected, then deselected
    # a run that may want it imports it
    assert suite.runpytest_inprocess("-m", "browser", "--co").ret != 0


def test_browser_postgres_and_ray_each_imply_slow(suite: pytest.Pytester) -> None:
    assert _selected(suite, "slow") == {
        "test_plain.py::test_heavy",  # by name
        "test_page.py::test_in_chromium",  # by module
        "test_db.py::test_query",  # by fixture
        "test_own.py::test_on_ray",  # its own marker
        "test_own.py::test_store[pg]",  # its case's marker
    }
    assert _selected(suite, "browser") == {"test_page.py::test_in_chromium"}
    assert _selected(suite, "postgres") == {"test_db.py::test_query", "test_own.py::test_store[pg]"}


def test_a_quick_test_over_the_limit_is_named_at_the_end(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiers, "QUICK_LIMIT", 0.0)  # every test is over it
    named = suite.runpytest_inprocess().outlines
    assert "tests not marked slow that took over 0 s" in "\n".join(named)
    listed = {found[1] for line in named if (found := re.match(r"\s*[\d.]+s (\S+)$", line))}
    assert "test_plain.py::test_quick" in listed
    assert "test_plain.py::test_heavy" not in listed  # slow: expected to take its time


def test_one_case_of_a_parametrised_test_can_be_slow(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiers, "TESTS", {"test_own.py::test_store[file]": ("slow",)})
    assert _selected(suite, "not slow") == {
        "test_plain.py::test_quick",
        "test_plain.py::test_heavy",
    }


def test_a_renamed_test_in_the_table_stops_the_run(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiers, "TESTS", {"test_plain.py::test_gone": ("slow",)})
    result = suite.runpytest_inprocess("--co", "-q")
    assert result.ret != 0
    assert "tests/tiers.py names tests that do not exist (renamed?): test_plain.py::test_gone" in (
        "\n".join(result.errlines + result.outlines)
    )


def test_the_markers_are_registered_with_strict_markers() -> None:
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in options["addopts"].split()
    registered = {line.split(":", 1)[0] for line in options["markers"]}
    assert registered == set(tiers.MARKERS)


def test_the_tables_name_modules_and_tests_that_exist() -> None:
    for module in tiers.MODULES:
        assert (REPO / module).is_file(), module
    defined: dict[str, set[str]] = {}  # each module read once
    for entry in tiers.TESTS:
        module, *names = entry.split("[", 1)[0].split("::")
        if module not in defined:
            tree = ast.parse((REPO / module).read_text(encoding="utf-8"))
            kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            defined[module] = {n.name for n in ast.walk(tree) if isinstance(n, kinds)}
        assert set(names) <= defined[module], entry
