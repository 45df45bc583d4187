"""The test data: the sample documents ship in the repository with their licence and
manifest, and the data sets outside it (``../shared/data``) are found in one place, which
skips a test on a developer's clone and fails it in CI when one is missing."""

from __future__ import annotations

import csv
import hashlib
import re
from pathlib import Path

import pytest

from tests.conftest import DOCS, REPO, REQUIRE_SHARED, SHARED_DATA, shared_set

LICENCE = "LICENSE-Apache-2.0.md"
COLUMNS = ["file", "bytes", "sha256", "source_repo", "commit", "source_path", "rights_assessment"]


def test_the_manifest_describes_every_sample_document_and_no_other() -> None:
    with (DOCS / "MANIFEST.tsv").open(encoding="utf-8", newline="") as table:
        rows = list(csv.DictReader(table, delimiter="\t"))
    assert rows and list(rows[0]) == COLUMNS
    on_disk = {p.name for p in DOCS.iterdir()} - {"MANIFEST.tsv", LICENCE}
    assert {row["file"] for row in rows} == on_disk
    for row in rows:
        data = (DOCS / row["file"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (
            int(row["bytes"]),
            row["sha256"],
        ), row["file"]
        assert row["source_repo"] and row["rights_assessment"], row["file"]


def test_the_licence_ships_beside_them() -> None:
    text = (DOCS / LICENCE).read_text(encoding="utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]


def test_a_present_data_set_is_its_folder(tmp_path: Path) -> None:
    (tmp_path / "scifact").mkdir()
    assert shared_set("scifact", root=tmp_path) == tmp_path / "scifact"


def test_a_missing_data_set_skips_saying_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REQUIRE_SHARED, raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        shared_set("scifact", root=tmp_path)
    where = tmp_path / "scifact"
    assert str(skipped.value) == f"BEIR SciFact not found at {where} (CI provides it)"
    monkeypatch.setenv(REQUIRE_SHARED, "0")
    with pytest.raises(pytest.skip.Exception):
        shared_set("squad-dev", root=tmp_path)


def test_a_missing_data_set_fails_where_it_is_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REQUIRE_SHARED, "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        shared_set("squad-dev", root=tmp_path)
    assert str(failed.value) == (
        f"SQuAD dev (BEIR format) not found at {tmp_path / 'squad-dev'} (CI provides it); "
        "FLEXMATCH_REQUIRE_SHARED is set"
    )


def test_the_data_sets_are_found_beside_the_clone_not_the_working_directory() -> None:
    assert SHARED_DATA.is_absolute() and SHARED_DATA.parts[-2:] == ("shared", "data")
    assert SHARED_DATA.parent.parent == REPO.parent


def test_ci_requires_the_data_sets() -> None:
    """CI runs ``.ci/run`` in a clone with ``../shared`` beside it: there a missing data
    set is a failure, not a skip nobody reads."""
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(rf"^export {REQUIRE_SHARED}=1$", script, re.MULTILINE)
    assert script.index(REQUIRE_SHARED) < script.index("./scripts/test")


# scripts run by hand, which take a data set's folder as an option (no test runs them)
SCRIPTS = {"adapters/console/screenshots.py", "adapters/console/timing.py"}


def test_tests_reach_outside_the_repository_only_through_shared_set() -> None:
    """A test that read ``../shared`` itself would fail on a clone, not skip."""
    tests = REPO / "tests"
    readers = [
        str(path.relative_to(tests))
        for path in sorted(tests.rglob("*.py"))
        if path.name != "conftest.py"
        and str(path.relative_to(tests)) not in SCRIPTS
        and path.name != Path(__file__).name
        and re.search(r'SHARED_DATA|/ "shared"', path.read_text(encoding="utf-8"))
    ]
    assert readers == []
