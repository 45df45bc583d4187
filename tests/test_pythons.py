"""The Pythons FlexMatch supports are those every dependency of ``[all]`` ships wheels for:
for each version ``requires-python`` admits, pip resolves the whole ``[all]`` install
against the package index for that Python, binary wheels only (the registry is asked; the
suite itself runs on one of them, see docs/development.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.conftest import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SUPPORTED = ("3.11", "3.12", "3.13", "3.14")
# pure-Python packages published as a source archive only (no wheel for any Python, so a
# wheels-only resolution cannot take them): their own dependencies are resolved instead
SOURCE_ONLY: dict[str, tuple[str, ...]] = {"odfpy": ("defusedxml",)}


def requirements(extra: str = "all") -> list[str]:
    """The core dependencies and those of ``extra``, its nested extras expanded."""
    extras = PROJECT["optional-dependencies"]
    found: list[str] = list(PROJECT["dependencies"])
    pending, seen = [extra], {extra}
    while pending:
        for requirement in extras[pending.pop()]:
            nested = re.fullmatch(r"flexmatch\[(.+)\]", requirement)
            if nested is None:
                found.append(requirement)
                continue
            for name in nested.group(1).split(","):
                if name not in seen:
                    seen.add(name)
                    pending.append(name)
    return found


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


def test_requires_python_admits_exactly_the_supported_versions() -> None:
    admitted = SpecifierSet(PROJECT["requires-python"])
    assert [v for v in SUPPORTED if Version(v) in admitted] == list(SUPPORTED)
    newest = Version(SUPPORTED[-1])
    assert Version(f"{newest.major}.{newest.minor + 1}") not in admitted  # not yet checked
    assert Version("3.10") not in admitted
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert running in SUPPORTED  # the suite runs on a supported Python


def test_the_all_extra_reaches_every_extra() -> None:
    everything = {_name(r) for r in requirements()}
    for extra in PROJECT["optional-dependencies"]:
        if extra in ("all", "dev", "docs"):
            continue
        assert {_name(r) for r in requirements(extra)} <= everything, extra


def _index_reachable() -> bool:
    try:
        return httpx.head("https://pypi.org/simple/pip/", timeout=10).status_code < 500
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_dependency_has_wheels_for(version: str, tmp_path: Path) -> None:
    if not _index_reachable() and not os.environ.get("CI"):
        pytest.skip("the package index (pypi.org) cannot be reached")
    wanted = [r for r in requirements() if _name(r) not in SOURCE_ONLY]
    wanted += [d for name in SOURCE_ONLY for d in SOURCE_ONLY[name]]
    listed = tmp_path / "requirements.txt"
    listed.write_text("\n".join(wanted) + "\n", encoding="utf-8")
    report = tmp_path / "report.json"
    resolved = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--only-binary=:all:",
            "--python-version",
            version,
            "--target",
            str(tmp_path / "target"),  # pip takes another Python's wheels only for a target
            "--report",
            str(report),
            "--quiet",
            "-r",
            str(listed),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    problems = [line for line in resolved.stderr.splitlines() if "ERROR" in line]
    assert resolved.returncode == 0, f"Python {version}: " + "\n".join(problems)
    installed = {
        item["metadata"]["name"].lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text(encoding="utf-8"))["install"]
    }
    for requirement in wanted:  # each one resolved (a marker may leave some out)
        if ";" not in requirement:
            assert _name(requirement).replace("_", "-") in {
                n.replace("_", "-") for n in installed
            }, requirement
    assert installed["torch"].startswith("2.13.")  # the pinned torch has wheels there too
