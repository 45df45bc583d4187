"""The ``git`` source type: the files of one commit of a Git repository, one document each.

A local repository is read in place (never its work tree: every file comes from the
commit, through ``git cat-file --batch``); a URL is cloned once, bare, into the knowledge
base's state folder and fetched on later runs. The source keeps the commit it last read
and which document id each path has: the next run reads only what ``git diff -M`` says
changed since, keeps a renamed file's id, and counts the rest as reached without reading
it (their stored copies are checked to carry the same blob, so a run that failed to store
a file reads it again). Deleted files are gone, removed by ``--prune``.

``git`` runs hardened (``git_commands``: an argument list, never a shell; a deadline, no
terminal prompts, no ``ext::`` transport); whatever fails is one line naming the source
and the repository. A URL's user and password are given to each clone or fetch, never
kept in the clone's config. A repository is untrusted input: git checks every object a
clone or fetch brings (``transfer.fsckObjects``, a tree entry naming a full path or ``..``
an error), and a file is written for its parser only under its own temporary folder: a
path that is absolute, has an empty, ``.`` or ``..`` part, or would land outside that
folder is refused before anything is written, a failure naming the path.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flexmatch.errors import ConfigError, ParseError
from flexmatch.inputs.sources.builtin import is_url
from flexmatch.inputs.sources.files import LoadTask, load, selected
from flexmatch.inputs.sources.git_commands import Blobs, Commit, Git, last_commits
from flexmatch.inputs.sources.items import Item, attempt
from flexmatch.inputs.sources.types import ItemRef, SourceType
from flexmatch.inputs.sources.validators import VERSION_KEY, read_version
from flexmatch.models import TOO_LARGE, Document, FailedDocument

STATE_VERSION = 1
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")  # git@host:owner/repo.git
_SYMLINK = "120000"


class GitOptions(BaseModel):
    """A git source's ``options``: the repository, and which branch or commit to read."""

    model_config = ConfigDict(extra="forbid")

    repository: str = Field(min_length=1, description="A local path or any URL git reaches.")
    branch: str | None = Field(None, min_length=1, description="Default: the repository's HEAD.")
    commit: str | None = Field(None, min_length=1, description="A fixed commit (or tag).")
    timeout: float = Field(600.0, gt=0, le=86400, description="Seconds for one git command.")

    @model_validator(mode="after")
    def _one_revision(self) -> GitOptions:
        if self.branch is not None and self.commit is not None:
            raise ValueError("give a branch or a commit, not both")
        return self


@dataclass(frozen=True)
class GitFile:
    """``ItemRef.data`` of one file of the commit read."""

    path: str
    blob: str
    size: int
    commit: Commit | None  # None: not looked up (its stored copy was expected to do)


@dataclass(frozen=True)
class TreeEntry:
    blob: str
    size: int


def unsafe_path(path: str) -> str | None:
    """Why a path of a commit's tree may not be written under a folder (None: it may):
    git never makes such a path, but a crafted tree object can hold one."""
    if path.startswith("/"):
        return "an absolute path"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "a path with an empty, '.' or '..' part"
    return None


def place_under(folder: Path, path: str, uri: str) -> Path:
    """Where ``path`` is written under ``folder``; a path that would land anywhere else is
    refused, naming it, before anything is written."""
    reason = unsafe_path(path)
    target = folder / path
    if reason is None and not target.resolve().is_relative_to(folder.resolve()):
        reason = "a path that leads outside the folder it is read in"
    if reason is not None:
        raise ParseError(f"{uri}: the repository names a file {path!r}, {reason}; not read")
    return target


def is_remote(repository: str) -> bool:
    """A URL (``https://``, ``ssh://``, ``file://``) or scp-like ``user@host:path``."""
    return is_url(repository) or bool(_SCP_LIKE.match(repository))


def shown(repository: str) -> str:
    """The repository as uris and errors name it: a URL without its user and password."""
    if not is_url(repository):
        return repository
    parts = urlsplit(repository)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=host))


class GitSource(SourceType):
    """The files of a branch or commit of a Git repository (``include``/``exclude``
    globs on their paths). It reads each file as it lists it, through one ``git cat-file``
    process, so it streams; its listing is the whole repository: ``--prune`` works."""

    options = GitOptions
    prunable = True
    _blobs: Blobs | None = None  # one `git cat-file --batch` for a listing's reads

    @property
    def streams(self) -> bool:
        return True

    @property
    def settings(self) -> GitOptions:
        return self.context.options

    @property
    def label(self) -> str:
        """How the repository is named in uris and errors."""
        repository = self.settings.repository
        return shown(repository) if is_remote(repository) else str(self._local_path())

    def list_items(self, inputs: list[str]) -> Iterable[ItemRef | Item]:
        if inputs:
            raise ConfigError(
                f"source '{self.context.name}': a git source reads its repository "
                "(options.repository); it takes no paths or URLs"
            )
        git = self._open()
        commit = self._resolve(git)
        state = self._state()
        tree = self._tree(git, commit)
        ids: dict[str, str] = dict(state.get("ids", {}))
        changed = self._changes(git, state.get("commit"), commit, ids)
        since = state.get("commit") if changed is not None else None  # the diff was used
        changed = set(tree) if changed is None else changed
        ids = self._ids(tree, ids)
        # what the store does not hold as it is now: read from git; the rest is reused
        wanted = {
            path
            for path, entry in tree.items()
            if path in changed
            or (self.context.stored.metadata(ids[path]) or {}).get(VERSION_KEY)
            != _version(path, entry)
        }
        commits = last_commits(git, commit, since, wanted)
        yield from self._refs(git, commit, tree, ids, commits)

    def _refs(
        self,
        git: Git,
        commit: str,
        tree: dict[str, TreeEntry],
        ids: dict[str, str],
        commits: dict[str, Commit],
    ) -> Iterator[ItemRef]:
        """A ref for every file, fetched as it is yielded: one whose version its stored
        copy carries is reused (not read), the others are read from git. The commit and
        the ids are kept only when every file was read."""
        self._git, self._commit, self._blobs, self._failed = git, commit, None, False
        try:
            for path, document_id in ids.items():
                entry = tree[path]
                yield ItemRef(
                    id=document_id,
                    uri=self._uri(path),
                    version=_version(path, entry),
                    data=GitFile(path, entry.blob, entry.size, commits.get(path)),
                )
        finally:
            if self._blobs is not None:
                self._blobs.close()
        if not self._failed and not self.context.log.incomplete:
            state = {"version": STATE_VERSION, "repository": self.label, "commit": commit}
            self.context.save_state({**state, "ids": ids})

    def fetch(self, ref: ItemRef) -> Item | Iterable[Item]:
        item = self._fetch(ref)
        if isinstance(item, FailedDocument) and item.skipped is None:
            self._failed = True
        return item

    def _fetch(self, ref: ItemRef) -> Item:
        file: GitFile = ref.data
        limit = self.context.limits.max_document_bytes
        if LoadTask(Path(file.path)).is_corpus:
            error = f"{ref.uri}: a JSON Lines corpus in a git source is not read"
            return FailedDocument(uri=ref.uri, error=error, skipped="unsupported type")

        if file.size > limit:  # skipped, as a folder walk skips it, before its blob is read
            error = (
                f"{ref.uri}: the file is {file.size:,} bytes, over the {limit:,}-byte "
                "cap (ingest.max_document_bytes)"
            )
            return FailedDocument(uri=ref.uri, error=error, skipped=TOO_LARGE)

        def build() -> Document:
            if self._blobs is None:
                self._blobs = Blobs(self._git)
            data = self._blobs.read(file.blob)
            last = file.commit
            if last is None:  # its stored copy was gone: one look-up for it alone
                last = last_commits(self._git, self._commit, None, {file.path})[file.path]
            with tempfile.TemporaryDirectory() as folder:
                path = place_under(Path(folder), file.path, ref.uri)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                task = LoadTask(path, root=Path(folder))
                parsers = self.context.limits.parsers
                (item,) = load(task, self.context.name, limit, self.context.parse_file, parsers)
            if isinstance(item, FailedDocument):
                error = item.error.replace(str(path), ref.uri)
                return item.model_copy(update={"uri": ref.uri, "error": error})  # type: ignore[return-value]
            metadata = {
                **item.metadata,
                "path": file.path,
                "commit": last.sha,
                "author": last.author,
                "committed_at": last.date,
            }
            return item.model_copy(update={"id": ref.id, "uri": ref.uri, "metadata": metadata})

        return attempt(ref.uri, build)

    # the repository, its commit and its files

    def _local_path(self) -> Path:
        path = Path(self.settings.repository).expanduser()
        if not path.is_absolute() and self.context.kb_dir is not None:
            path = self.context.kb_dir / path
        return path.resolve()

    def _open(self) -> Git:
        """The repository to read: a local one in place, a URL's bare clone (made or
        fetched now). The clone's config holds the URL without its user and password:
        the full URL is given to each fetch, never stored."""
        timeout = self.settings.timeout
        if not is_remote(self.settings.repository):
            path = self._local_path()
            git = Git(self.context.name, self.label, path, timeout)
            if not path.is_dir():
                raise git.fail(f"read {self.label}", "no such folder")
            git.run("rev-parse", "--git-dir", what=f"read {self.label}")
            return git
        clone = self._clone_folder()
        git = Git(self.context.name, self.label, clone, timeout)
        url = self.settings.repository
        # GIT_PROTOCOL_FROM_USER=0 refuses file:// too: allowed when it is the URL named
        file = ["-c", "protocol.file.allow=always"] if url.lower().startswith("file:") else []
        if (clone / "HEAD").is_file():
            git.run("remote", "set-url", "origin", self.label, what=f"fetch {self.label}")
            refs = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]
            fetch = ["fetch", "--quiet", "--prune", "--no-write-fetch-head", "--end-of-options"]
            git.run(*file, *fetch, url, *refs, what=f"fetch {self.label}")
            return git
        partial = clone.with_name(f"{clone.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        clone.parent.mkdir(parents=True, exist_ok=True)
        command = [*file, "clone", "--bare", "--quiet", "--", url, str(partial)]
        git.run(*command, what=f"clone {self.label}", here=False)
        forget = ["-C", str(partial), "remote", "set-url", "origin", self.label]
        git.run(*forget, what=f"clone {self.label}", here=False)
        partial.replace(clone)  # a clone cut short is never taken for one
        return git

    def _clone_folder(self) -> Path:
        state = self.context.stored.state_file
        if state is not None:
            return state.with_suffix(".git")
        if not hasattr(self, "_scratch"):  # no knowledge base folder: a clone for this run
            self._scratch = tempfile.TemporaryDirectory(prefix="flexmatch-git-")
        return Path(self._scratch.name) / "clone.git"

    def _resolve(self, git: Git) -> str:
        """The commit to read: of the branch, the given commit, or HEAD."""
        settings = self.settings
        if settings.commit is not None:
            revision, what = settings.commit, f"find commit '{settings.commit}'"
        elif settings.branch is not None:
            revision, what = f"refs/heads/{settings.branch}", f"find branch '{settings.branch}'"
        else:
            revision, what = "HEAD", "find HEAD"
        what = f"{what} in {self.label}"
        command = ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"]
        code, out, _ = git.status(*command, what=what)
        if code != 0:
            raise git.fail(what, "there is none")
        return out.decode().strip()

    def _tree(self, git: Git, commit: str) -> dict[str, TreeEntry]:
        """The commit's regular files the include/exclude globs take (hidden and
        symlinked ones left out, as a folder walk leaves them)."""
        out = git.run(
            "ls-tree",
            "-r",
            "-l",
            "-z",
            "--full-tree",
            commit,
            what=f"list the files of {commit[:12]} in {self.label}",
        )
        config = self.context.config
        tree: dict[str, TreeEntry] = {}
        for record in out.decode("utf-8", "surrogateescape").split("\0"):
            header, tab, path = record.partition("\t")
            fields = header.split()
            if not tab or len(fields) != 4 or fields[1] != "blob" or fields[0] == _SYMLINK:
                continue
            if any(part.startswith(".") for part in path.split("/")):
                continue
            if selected(Path(path), config.include, config.exclude):
                tree[path] = TreeEntry(blob=fields[2], size=int(fields[3]))
        return tree

    def _changes(
        self,
        git: Git,
        stored: str | None,
        commit: str,
        ids: dict[str, str],
    ) -> set[str] | None:
        """The paths changed since the ``stored`` commit (None: all, when it is not known
        or not an ancestor, as after a force push); a renamed path takes its old path's id
        in ``ids``, a deleted path's document is gone."""
        if stored is None:
            return None
        if stored == commit:
            return set()
        code, _, _ = git.status("merge-base", "--is-ancestor", stored, commit, what="compare")
        if code != 0:  # not an ancestor (a force push), or no longer known
            return None
        out = git.run(
            "diff",
            "--name-status",
            "-z",
            "-M",
            "--no-ext-diff",
            stored,
            commit,
            "--",
            what=f"compare {stored[:12]} with {commit[:12]} in {self.label}",
        )
        tokens = out.decode("utf-8", "surrogateescape").split("\0")
        changed: set[str] = set()
        index = 0
        while index < len(tokens) and tokens[index]:
            status = tokens[index]
            if status[0] in "RC":
                old, new = tokens[index + 1], tokens[index + 2]
                index += 3
                if status[0] == "R" and old in ids and new not in ids:
                    ids[new] = ids.pop(old)  # one document, under its new path
                changed.add(new)
            else:
                path = tokens[index + 1]
                index += 2
                if status[0] == "D" and path in ids:
                    self.context.log.gone.add(ids.pop(path))
                else:
                    changed.add(path)
        return changed

    def _state(self) -> dict[str, Any]:
        """The last complete run's commit and ids, when it read this same repository."""
        state = self.context.load_state()
        if state.get("version") != STATE_VERSION or state.get("repository") != self.label:
            return {}
        if not isinstance(state.get("ids"), dict) or not isinstance(state.get("commit"), str):
            return {}
        return state

    def _uri(self, path: str) -> str:
        return f"{self.label.rstrip('/')}/{path}"

    def _ids(self, tree: dict[str, TreeEntry], known: dict[str, str]) -> dict[str, str]:
        """One distinct id per path of ``tree``: the id it had (a renamed path keeps its
        old path's), else its natural id; a new file at a renamed file's old path finds
        that id held, so it gets one derived from its uri (kept in the state after)."""
        ids: dict[str, str] = {}
        taken: set[str] = set()
        for path in sorted(tree):
            if (held := known.get(path)) is not None and held not in taken:
                ids[path] = held
                taken.add(held)
        natural = {path: self._new_id(path) for path in sorted(tree) if path not in ids}
        for path, document_id in natural.items():
            if document_id not in taken:
                ids[path] = document_id
                taken.add(document_id)
        avoid = taken | set(natural.values())
        for path in sorted(natural.keys() - ids.keys()):
            number = 2
            while (document_id := self._new_id(path, number)) in avoid:
                number += 1
            ids[path] = document_id
            avoid.add(document_id)
        return {path: ids[path] for path in sorted(tree)}

    def _new_id(self, path: str, number: int = 1) -> str:
        uri = self._uri(path)
        return self.context.document_id(uri if number == 1 else f"{uri}#{number}")


def _version(path: str, entry: TreeEntry) -> str:
    """A file's version hint: its blob and its path (a rename is read again)."""
    return read_version(f"{entry.blob}:{path}")
