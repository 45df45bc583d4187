"""A git source through the real ``flexmatch`` command: a temporary repository is
ingested, changed by a commit (one file modified, one renamed, one deleted) and synced
again with ``--prune``, then a new file at the renamed one's old path and the renamed
one deleted; a branch; a ``file://`` URL cloned and fetched; bad settings fail
in one line."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run, write_config
from tests.inputs.test_git_source import git

APP = '''"""Where uploaded files are kept."""
import hashlib


def file_checksum(data: bytes) -> str:
    """Compute the SHA-256 checksum of a file's bytes, as hexadecimal."""
    return hashlib.sha256(data).hexdigest()
'''


def make_repo(folder: Path) -> Path:
    repo = folder / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "storage.py").write_text(APP)
    (repo / "guide.md").write_text("# Guide\n\nDeploy the service with the deploy script.\n")
    (repo / "notes.txt").write_text("Release notes: the payment export is new.\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    return repo


def make_kb(folder: Path, options: str) -> Path:
    kb = folder / "kb"
    config = (
        "default_source: repo\nsources:\n  repo:\n    type: git\n    chunker: code\n"
        f"    matching_text: code-questions\n    options: {options}\n"
    )
    write_config(kb, config)
    return kb


def ingest(kb: Path, *extra: str) -> dict:
    result = run("ingest", "--kb", str(kb), "--source", "repo", "--json", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def outcomes(report: dict) -> dict[str, str]:
    return {o["input"].rsplit("/", 1)[-1]: o["outcome"] for o in report["outcomes"]}


def documents(kb: Path) -> dict[str, dict]:
    listed = run("docs", "list", "--kb", str(kb), "--json")
    assert listed.returncode == 0, listed.stderr
    return {d["metadata"]["path"]: d for d in json.loads(listed.stdout)}


def test_a_commit_is_synced_file_by_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    kb = make_kb(tmp_path, "{repository: ../repo}")
    first = ingest(kb)
    assert outcomes(first) == {"storage.py": "added", "guide.md": "added", "notes.txt": "added"}
    before = documents(kb)
    assert before["src/storage.py"]["metadata"]["author"] == "Ann <ann@example.org>"
    found = run("query", "--kb", str(kb), "--json", "--top-n", "1", "sha256 checksum of bytes")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["cite"] == "storage.py:1-7"

    (repo / "guide.md").write_text("# Guide\n\nDeploy the service with the new script.\n")
    git(repo, "mv", "notes.txt", "release.txt")
    git(repo, "rm", "-q", "src/storage.py")
    git(repo, "commit", "-qam", "second", author="Bob")
    second = ingest(kb, "--prune")
    assert outcomes(second) == {"guide.md": "changed", "release.txt": "changed"}
    assert second["removed"] == [f"{repo.resolve()}/src/storage.py"]
    after = documents(kb)
    assert sorted(after) == ["guide.md", "release.txt"]
    assert after["release.txt"]["id"] == before["notes.txt"]["id"]  # renamed, one document
    assert after["release.txt"]["uri"] == f"{repo.resolve()}/release.txt"
    assert after["guide.md"]["metadata"]["author"] == "Bob <bob@example.org>"

    third = ingest(kb, "--prune")  # nothing changed: nothing read from git
    assert third["not_modified"] == 2 and third["removed"] == []
    assert set(outcomes(third).values()) == {"unchanged"}

    (repo / "notes.txt").write_text("New notes where the renamed ones were: billing moved.\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "new notes")
    fourth = ingest(kb, "--prune")  # a new file at the renamed one's old path: its own id
    assert outcomes(fourth) == {
        "notes.txt": "added",
        "guide.md": "unchanged",
        "release.txt": "unchanged",
    }
    assert len({d["id"] for d in documents(kb).values()}) == 3
    git(repo, "rm", "-q", "release.txt")
    git(repo, "commit", "-qm", "release notes gone")
    fifth = ingest(kb, "--prune")
    assert fifth["removed"] == [f"{repo.resolve()}/release.txt"]
    assert sorted(documents(kb)) == ["guide.md", "notes.txt"]


def test_a_branch_a_url_and_bad_settings(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "feature.md").write_text("# Feature\n\nThe export runs nightly on this branch.\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "feature")
    git(repo, "checkout", "-q", "main")

    kb = make_kb(tmp_path, f"{{repository: '{repo.as_uri()}', branch: feature}}")
    first = ingest(kb)
    assert "feature.md" in outcomes(first)
    clones = list((kb / ".flexmatch").rglob("*.git"))
    assert len(clones) == 1 and (clones[0] / "HEAD").is_file()  # cloned, bare
    git(repo, "checkout", "-q", "feature")
    (repo / "feature.md").write_text("# Feature\n\nThe export runs hourly now.\n")
    git(repo, "commit", "-qam", "hourly")
    second = ingest(kb)
    assert outcomes(second) == {  # fetched: the one file changed is read again
        "feature.md": "changed",
        "storage.py": "unchanged",
        "guide.md": "unchanged",
        "notes.txt": "unchanged",
    }
    shown = documents(kb)["feature.md"]
    assert shown["uri"] == f"{repo.as_uri()}/feature.md"

    for options, message in [
        (
            f"{{repository: '{tmp_path}'}}",
            f"source 'repo': git cannot read {tmp_path.resolve()}: not a git repository",
        ),
        (
            f"{{repository: '{repo}', branch: nope}}",
            f"source 'repo': git cannot find branch 'nope' in {repo.resolve()}: there is none",
        ),
    ]:
        config = (kb / "flexmatch.yaml").read_text().split("    options:")[0]
        write_config(kb, f"{config}    options: {options}\n")
        result = run("ingest", "--kb", str(kb), "--source", "repo")
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr
