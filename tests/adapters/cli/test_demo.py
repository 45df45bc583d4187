"""``flexmatch demo``: the sample corpus the package ships, ingested and queried offline
through the real command, from the checkout and from an installed wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flexmatch.adapters.cli.demo import EXAMPLES
from tests.conftest import REPO, run, run_installed

pytestmark = pytest.mark.slow  # a real command run: model load, ingest, three queries

OFFLINE = {"FLEXMATCH_LLM": "", "FLEXMATCH_LLM_API_BASE": "", "FLEXMATCH_LLM_API_KEY": ""}
SAMPLES = REPO / "flexmatch" / "samples"


def first_names(answer: dict) -> set[str]:
    top = answer["results"][0]
    return {top["document_id"], top["uri"].rsplit("/", 1)[-1]}


def test_demo_puts_the_right_document_first(tmp_path: Path) -> None:
    kb = tmp_path / "demo-kb"
    result = run("demo", "--kb", str(kb), "--json", cwd=tmp_path, env=OFFLINE)
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["ingest"]["added"] == 7 and output["ingest"]["failed"] == []
    assert [a["question"] for a in output["answers"]] == [e.question for e in EXAMPLES]
    for example, answer in zip(EXAMPLES, output["answers"], strict=True):
        assert example.answer_in in first_names(answer), (example.question, answer["results"])
        assert answer["first_is_expected"]
    assert (kb / "flexmatch.yaml").is_file()

    again = run("demo", "--kb", str(kb), cwd=tmp_path, env=OFFLINE)  # the text output
    assert again.returncode == 0, again.stderr
    text = " ".join(again.stdout.split())  # as read, whatever the terminal's width
    assert "Ingested 7 documents (0 new, 7 unchanged): nothing to write" in text
    # the Sunday timetable's text, shown under question 1
    assert "the last ferry to Gull Island leaves at 16:00" in text
    assert "Traceback" not in again.stderr


def test_demo_says_when_the_expected_document_is_not_first(tmp_path: Path) -> None:
    """Run in-process with one example's expected document swapped: exit code 1, named."""
    script = (
        "import sys\n"
        "from flexmatch.adapters.cli import demo\n"
        "demo.EXAMPLES = (demo.Example(demo.EXAMPLES[0].question, 'mooring-fees.txt'),)\n"
        "from flexmatch.adapters.cli.app import main\n"
        "sys.argv = ['flexmatch', 'demo', '--kb', 'kb']\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, **OFFLINE},
        timeout=300,
    )
    assert result.returncode == 1
    assert "expected mooring-fees.txt first" in " ".join(result.stderr.split())


def test_samples_ship_in_the_wheel_and_the_demo_runs_from_it(wheel: Path, tmp_path: Path) -> None:
    script = (
        "import os, sys\n"
        + "".join(f"os.environ[{k!r}] = {v!r}\n" for k, v in OFFLINE.items())
        + "sys.argv = ['flexmatch', 'demo', '--kb', 'kb', '--json']\n"
        "from flexmatch.adapters.cli.app import main\n"
        "main()\n"
    )
    result = run_installed(wheel, tmp_path, script)
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert Path(output["samples"]).is_relative_to(tmp_path / "site")  # not the checkout's
    assert sorted(p.name for p in Path(output["samples"]).iterdir()) == sorted(
        p.name for p in SAMPLES.iterdir()
    )
    assert all(answer["first_is_expected"] for answer in output["answers"])
