"""The ``git`` source type on a temporary repository, without a knowledge base: what it
lists, reads and keeps between runs, and the one-line errors (the CLI test is in
tests/adapters/cli/test_git_source.py)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from flexmatch.config import IngestConfig, SourceConfig
from flexmatch.errors import ConfigError, ParseError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.sources import git_commands
from flexmatch.inputs.sources.git import GitOptions, GitSource, place_under, shown, unsafe_path
from flexmatch.inputs.sources.types import ItemRef, SourceContext, StoredCopies, source_options
from flexmatch.inputs.sources.validators import VERSION_KEY
from flexmatch.models import Document, FailedDocument


def git(repo: Path, *args: str, author: str = "Ann") -> None:
    identity = ["-c", f"user.name={author}", "-c", f"user.email={author.lower()}@example.org"]
    subprocess.run(["git", "-C", str(repo), *identity, *args], check=True, capture_output=True)


def make_repo(folder: Path) -> Path:
    repo = folder / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text(
        'def greet(name):\n    """Say hello."""\n    return name\n'
    )
    (repo / "guide.md").write_text("# Guide\n\nDeploy with care.\n")
    (repo / "notes.txt").write_text("Release notes.\n")
    (repo / ".hidden.txt").write_text("left out, as a folder walk leaves it\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    return repo


class Store:
    """What a knowledge base would hold: the documents a run gave."""

    def __init__(self) -> None:
        self.documents: dict[str, Document] = {}

    def copies(self, state: Path) -> StoredCopies:
        def metadata(document_id: str) -> dict | None:
            document = self.documents.get(document_id)
            return document.metadata if document else None

        return StoredCopies(metadata=metadata, document=self.documents.get, state_file=state)


def run(
    tmp_path: Path, store: Store, **options: str
) -> tuple[SourceContext, list[Document | FailedDocument], int]:
    """One run as the reader makes it: each listed ref fetched unless its version is
    stored; the documents read are kept. Gives the context, what was read, and how
    many were reused."""
    config = SourceConfig(type="git", options=options)
    context = SourceContext(
        name="repo",
        config=config,
        options=source_options(GitSource, config, "flexmatch.yaml: sources.repo"),
        kb_dir=tmp_path,
        limits=IngestConfig(),
        stored=store.copies(tmp_path / "state.json"),
    )
    source = GitSource(context)
    read: list[Document | FailedDocument] = []
    reused = 0
    for ref in source.list_items([]):
        assert isinstance(ref, ItemRef)
        context.log.reach(ref.id)
        stored = store.documents.get(ref.id)
        if stored is not None and stored.metadata.get(VERSION_KEY) == ref.version:
            reused += 1
            continue
        item = source.fetch(ref)
        assert isinstance(item, Document | FailedDocument)
        if isinstance(item, Document):
            item = item.model_copy(update={"metadata": {**item.metadata, VERSION_KEY: ref.version}})
            store.documents[item.id] = item
        read.append(item)
    return context, read, reused


def by_path(items: list[Document | FailedDocument]) -> dict[str, Document]:
    return {d.metadata["path"]: d for d in items if isinstance(d, Document)}


def test_each_file_is_a_document_with_its_commit_author_and_lines(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "data.txt").write_bytes(b"\x00\x01\x02 binary, skipped as a folder walk skips it")
    git(repo, "add", "data.txt")
    git(repo, "commit", "-qm", "data")
    _, read, _ = run(tmp_path, Store(), repository=str(repo))
    documents = by_path(read)
    assert sorted(documents) == ["guide.md", "notes.txt", "src/app.py"]
    app = documents["src/app.py"]
    assert app.uri == f"{repo.resolve()}/src/app.py"
    assert app.metadata["author"] == "Ann <ann@example.org>"
    assert len(app.metadata["commit"]) == 40
    assert any(e.location and e.location.line_start for e in app.elements)  # the code parser's
    (skipped,) = [item for item in read if isinstance(item, FailedDocument)]
    assert skipped.skipped == "binary file" and skipped.uri == f"{repo.resolve()}/data.txt"
    assert (tmp_path / "state.json").is_file()  # a skipped file is no failure


def test_a_resync_reads_only_what_changed_and_keeps_a_renamed_id(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    store = Store()
    _, first, _ = run(tmp_path, store, repository=str(repo))
    ids = {path: d.id for path, d in by_path(first).items()}

    (repo / "guide.md").write_text("# Guide\n\nDeploy with more care.\n")
    git(repo, "mv", "notes.txt", "release.txt")
    git(repo, "rm", "-q", "src/app.py")
    git(repo, "commit", "-qam", "second", author="Bob")
    context, second, reused = run(tmp_path, store, repository=str(repo))

    documents = by_path(second)
    assert sorted(documents) == ["guide.md", "release.txt"] and reused == 0
    assert documents["release.txt"].id == ids["notes.txt"]  # one document, renamed
    assert documents["guide.md"].metadata["author"] == "Bob <bob@example.org>"
    assert context.log.gone == {ids["src/app.py"]}
    assert ids["src/app.py"] not in context.log.reached

    _, third, reused = run(tmp_path, store, repository=str(repo))  # nothing changed
    assert third == [] and reused == 2


def test_a_new_file_at_a_renamed_files_old_path_is_a_document_of_its_own(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    store = Store()
    run(tmp_path, store, repository=str(repo))
    git(repo, "mv", "notes.txt", "release.txt")
    git(repo, "commit", "-qm", "renamed")
    run(tmp_path, store, repository=str(repo))
    (repo / "notes.txt").write_text("New notes, where the old ones were.\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "new notes")
    _, added, _ = run(tmp_path, store, repository=str(repo))
    notes = by_path(added)["notes.txt"]

    context, again, reused = run(tmp_path, store, repository=str(repo))  # nothing changed
    assert again == [] and reused == 4
    assert len(context.log.reached) == 4  # four files, four documents

    git(repo, "rm", "-q", "release.txt")
    git(repo, "commit", "-qm", "gone")
    context, _, _ = run(tmp_path, store, repository=str(repo))
    assert notes.id in context.log.reached and notes.id not in context.log.gone
    assert len(context.log.gone) == 1


def test_files_the_store_lost_are_read_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    store = Store()
    run(tmp_path, store, repository=str(repo))
    del store.documents[next(iter(store.documents))]  # e.g. a run stopped before its writes
    _, again, reused = run(tmp_path, store, repository=str(repo))
    assert len(by_path(again)) == 1 and reused == 2


def test_a_run_that_failed_a_file_keeps_the_commit_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path)
    store = Store()
    run(tmp_path, store, repository=str(repo))
    state = (tmp_path / "state.json").read_text()
    (repo / "guide.md").write_text("# Guide\n\nChanged.\n")
    git(repo, "commit", "-qam", "second")

    def broken(self: object, blob: str) -> bytes:
        raise ConfigError("git stopped")

    with monkeypatch.context() as patch:
        patch.setattr(git_commands.Blobs, "read", broken)
        _, failed, _ = run(tmp_path, store, repository=str(repo))
    assert [type(item) for item in failed] == [FailedDocument]
    assert (tmp_path / "state.json").read_text() == state  # this run repeats next time
    _, again, _ = run(tmp_path, store, repository=str(repo))
    assert list(by_path(again)) == ["guide.md"]
    assert (tmp_path / "state.json").read_text() != state


def test_branch_and_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "feature.md").write_text("# Feature\n\nOnly on the branch.\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "feature")
    _, read, _ = run(tmp_path, Store(), repository=str(repo), branch="main")
    assert "feature.md" not in by_path(read)
    _, read, _ = run(tmp_path, Store(), repository=str(repo), commit="feature")
    assert "feature.md" in by_path(read)


ERRORS = [
    ({"repository": "{tmp}/nothing"}, "git cannot read {tmp}/nothing: no such folder"),
    ({"repository": "{tmp}/plain"}, "git cannot read {tmp}/plain: not a git repository"),
    (
        {"repository": "{repo}", "branch": "nope"},
        "git cannot find branch 'nope' in {repo}: there is none",
    ),
    (
        {"repository": "{repo}", "commit": "-x"},
        "git cannot find commit '-x' in {repo}: there is none",
    ),
]


@pytest.mark.parametrize(("options", "message"), ERRORS)
def test_errors_are_one_line_naming_the_source(
    tmp_path: Path, options: dict[str, str], message: str
) -> None:
    repo = make_repo(tmp_path)
    (tmp_path / "plain").mkdir()
    values = {"tmp": str(tmp_path.resolve()), "repo": str(repo.resolve())}
    given = {k: v.format(**values) for k, v in options.items()}
    with pytest.raises(ConfigError) as raised:
        run(tmp_path, Store(), **given)
    assert str(raised.value) == "source 'repo': " + message.format(**values)


def test_options_and_a_missing_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="give a branch or a commit, not both"):
        run(tmp_path, Store(), repository="x", branch="a", commit="b")
    monkeypatch.setattr(git_commands.shutil, "which", lambda _: None)
    with pytest.raises(ConfigError, match="source 'repo': the 'git' command is not installed"):
        run(tmp_path, Store(), repository=str(tmp_path))
    assert GitOptions(repository="x").timeout > 0


def test_a_url_is_shown_without_its_password() -> None:
    assert shown("https://me:secret@example.org/r.git") == "https://example.org/r.git"
    assert shown("/srv/repo") == "/srv/repo"


def test_a_urls_password_is_never_kept_in_the_clone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    url = f"file://me:secret@localhost{repo.resolve()}"
    clone = tmp_path / "state.git"

    def kept() -> list[bytes]:
        files = [p for p in clone.rglob("*") if p.is_file() and "objects" not in p.parts]
        return [p.read_bytes() for p in files]

    store = Store()
    _, first, _ = run(tmp_path, store, repository=url)
    assert len(by_path(first)) == 3
    assert kept() and not any(b"secret" in data for data in kept())
    (repo / "guide.md").write_text("# Guide\n\nFetched.\n")
    git(repo, "commit", "-qam", "second")
    _, second, _ = run(tmp_path, store, repository=url)  # fetched with the full URL
    assert list(by_path(second)) == ["guide.md"]
    assert not any(b"secret" in data for data in kept())


def test_the_ext_transport_is_refused_whatever_the_users_config_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    config = tmp_path / "gitconfig"
    config.write_text(
        "[protocol]\n\tallow = always\n"
        f'[url "ext::sh -c touch% {marker}% #"]\n\tinsteadOf = https://evil.example/\n'
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    with pytest.raises(ConfigError) as raised:
        run(tmp_path, Store(), repository="https://evil.example/x")
    assert str(raised.value).endswith(
        "cannot clone https://evil.example/x: transport 'ext' not allowed"
    )
    assert not marker.exists()


def test_a_rewritten_history_is_listed_whole(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    store = Store()
    run(tmp_path, store, repository=str(repo))
    (repo / "guide.md").write_text("# Guide\n\nRewritten.\n")
    git(repo, "commit", "-qa", "--amend", "-m", "first, again")  # the stored commit is gone
    context, read, reused = run(tmp_path, store, repository=str(repo))
    assert list(by_path(read)) == ["guide.md"] and reused == 2
    assert len(context.log.reached) == 3 and not context.log.gone


def crafted_repo(folder: Path, names: list[bytes]) -> Path:
    """A repository whose one commit's tree holds ``names`` (each a file saying "pwned")
    and ``ok.txt``: tree objects written raw, as git itself never writes such names."""
    repo = folder / "crafted"
    git(folder, "init", "-q", "-b", "main", str(repo))

    def written(kind: str, data: bytes) -> bytes:
        command = ["git", "-C", str(repo), "hash-object", "-w", "-t", kind, "--literally"]
        done = subprocess.run([*command, "--stdin"], input=data, capture_output=True, check=True)
        return done.stdout.strip()

    blob = bytes.fromhex(written("blob", b"pwned\n").decode())
    entries = sorted([*names, b"ok.txt"])
    tree = written("tree", b"".join(b"100644 " + name + b"\0" + blob for name in entries))
    identity = ["-c", "user.name=Eve", "-c", "user.email=eve@example.org"]
    commit = subprocess.run(
        ["git", "-C", str(repo), *identity, "commit-tree", tree.decode(), "-m", "crafted"],
        capture_output=True,
        check=True,
    ).stdout.strip()
    git(repo, "update-ref", "refs/heads/main", commit.decode())
    return repo


def test_a_tree_naming_a_path_outside_its_folder_writes_nothing_there(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "written.txt"
    repo = crafted_repo(tmp_path, [str(target).encode(), b"a//b.txt"])
    _, read, _ = run(tmp_path, Store(), repository=str(repo))
    assert not target.exists()
    assert list(by_path(read)) == ["ok.txt"]
    failed = {item.error for item in read if isinstance(item, FailedDocument)}
    assert failed == {
        f"{repo.resolve()}/{target}: the repository names a file '{target}', an absolute "
        "path; not read",
        f"{repo.resolve()}/a//b.txt: the repository names a file 'a//b.txt', a path with an "
        "empty, '.' or '..' part; not read",
    }


@pytest.mark.parametrize("path", ["/etc/x", "a//b", "./a", "a/../../b", "..", "a/.", ""])
def test_unsafe_paths_are_named(path: str, tmp_path: Path) -> None:
    assert unsafe_path(path) is not None
    with pytest.raises(ParseError, match="the repository names a file"):
        place_under(tmp_path, path, "uri")
    assert unsafe_path("src/app.py") is None
    assert place_under(tmp_path, "src/app.py", "uri") == tmp_path / "src" / "app.py"


def test_a_clone_checks_every_object_and_refuses_a_crafted_tree(tmp_path: Path) -> None:
    target = tmp_path / "outside" / "written.txt"
    repo = crafted_repo(tmp_path, [str(target).encode()])
    with pytest.raises(ConfigError) as raised:
        run(tmp_path, Store(), repository=f"file://{repo.resolve()}")
    assert str(raised.value).endswith(
        "an object fails git's checks (fsck): fullPathname: contains full pathnames"
    )
    assert not target.exists() and not (tmp_path / "state.git").exists()


def test_closing_the_blob_reader_does_not_wait_for_a_forked_worker(tmp_path: Path) -> None:
    """A worker forked while ``git cat-file`` runs holds its input open: closing it used
    to wait 10 s for an exit that never came."""
    repo = make_repo(tmp_path)
    reader = git_commands.Blobs(git_commands.Git("repo", "repo", repo, 30.0))
    blob = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD:notes.txt"], capture_output=True, check=True
    ).stdout.decode()
    assert reader.read(blob.strip()) == b"Release notes.\n"
    pool = IsolatedPool(workers=1)
    try:
        assert pool.run(len, "abc", label="a fork") == 3  # forked while cat-file runs
        started = time.monotonic()
        reader.close()
        assert time.monotonic() - started < 5.0  # room for a loaded machine, short of 10 s
        assert reader.process.returncode is not None
    finally:
        pool.close()
