"""The CLI's new edges in-process (typer's CliRunner), quick: no store is opened.
``test_rough_edges`` runs the same through the real command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import flexmatch
from flexmatch.adapters.cli.app import app

runner = CliRunner()


def test_version_needs_no_knowledge_base() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"flexmatch {flexmatch.__version__}"


def test_a_command_on_a_folder_without_a_config_is_refused(tmp_path: Path) -> None:
    for args in (["stats"], ["prompts", "list"], ["chains"]):
        result = runner.invoke(app, [*args, "--kb", str(tmp_path)])
        assert isinstance(result.exception, flexmatch.ConfigError), args
        assert f"{tmp_path} is not a knowledge-base folder: it has no flexmatch.yaml" in str(
            result.exception
        )
        assert result.stdout == ""  # nothing printed before the refusal
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "notes.md").write_text("# Notes\n")
    result = runner.invoke(app, ["stats", "--kb", str(tmp_path / "notes.md")])
    assert isinstance(result.exception, flexmatch.ConfigError)
    assert "notes.md is a file, not a knowledge-base folder" in str(result.exception)


def test_prompts_eject_and_list(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    assert runner.invoke(app, ["init", str(kb)]).exit_code == 0
    result = runner.invoke(app, ["prompts", "eject", "questions", "--kb", str(kb)])
    assert result.exit_code == 0, result.output
    copy = kb / "prompts" / "questions.j2"
    assert copy.is_file() and "questions.j2" in result.stdout
    copy.write_text("mine", encoding="utf-8")
    again = runner.invoke(app, ["prompts", "eject", "questions.j2", "--kb", str(kb)])
    assert isinstance(again.exception, flexmatch.ConfigError)
    assert "already exists" in str(again.exception) and copy.read_text() == "mine"
    listed = runner.invoke(app, ["prompts", "list", "--kb", str(kb)], env={"COLUMNS": "200"})
    cells = re.sub(r"[\s│┃]", "", listed.stdout)  # a long path wraps inside its cell
    assert str(copy) in cells and "built-in" in listed.stdout


@pytest.mark.parametrize("name", ["", "nope", "../configs/default.yaml", "questions/"])
def test_prompts_eject_refuses_what_is_not_a_builtin_prompt(tmp_path: Path, name: str) -> None:
    with pytest.raises(flexmatch.ConfigError, match="no built-in prompt"):
        flexmatch.KnowledgeBase.eject_prompt(tmp_path, name)
    assert not (tmp_path / "prompts").exists()


def test_every_template_listed_is_accepted(tmp_path: Path) -> None:
    listed = runner.invoke(app, ["init", "--templates"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    for name in flexmatch.KnowledgeBase.templates():
        assert name in listed.stdout
        made = runner.invoke(app, ["init", str(tmp_path / name), "--template", name])
        assert made.exit_code == 0, (name, made.exception)
    with pytest.raises(flexmatch.ConfigError, match="no template 'setups'"):
        flexmatch.KnowledgeBase.init(tmp_path / "x", "setups")
