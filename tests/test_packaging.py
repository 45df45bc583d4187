"""The built-in chains, prompts and configs ship inside the wheel and work from it."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("flexmatch-*.whl")
    return built


def test_wheel_contains_builtin_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for kind in ("chains", "prompts", "configs"):
        for path in (REPO / kind).rglob("*"):
            if path.is_file():
                relative = path.relative_to(REPO / kind).as_posix()
                assert f"flexmatch/_data/{kind}/{relative}" in names


def test_installed_wheel_works_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    script = (
        "import flexmatch, pathlib\n"
        "from flexmatch.knowledge_base import KnowledgeBase\n"
        "from flexmatch.resources import builtin_dir\n"
        f"assert pathlib.Path(flexmatch.__file__).is_relative_to({str(target)!r})\n"
        "assert builtin_dir('chains').parent.name == '_data'\n"
        "KnowledgeBase.init('kb')\n"
        "kb = KnowledgeBase.open('kb', env={})\n"
        "print([c.spec.name for c in kb.source_chains('default').all()])\n"
        "print(kb.format('q', []).splitlines()[0])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "['structure', 'sentences', 'headings']",
        "## Facts from the knowledge base",
    ]
