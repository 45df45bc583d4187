"""The built-in chains, prompts and configs ship inside the wheel and work from it."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.conftest import REPO, run_installed


def test_wheel_contains_builtin_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for kind in ("chains", "prompts", "configs"):
        for path in (REPO / kind).rglob("*"):
            if path.is_file():
                relative = path.relative_to(REPO / kind).as_posix()
                assert f"flexmatch/_data/{kind}/{relative}" in names


def test_installed_wheel_works_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"  # where run_installed puts it
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
    result = run_installed(wheel, tmp_path, script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "['structure', 'sentences', 'headings']",
        "## Facts from the knowledge base",
    ]
