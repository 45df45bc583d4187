"""``git`` as a subprocess, hardened: what the ``git`` source type runs and how.

``git`` runs with an argument list (never a shell), a deadline for every command, no
terminal prompts, no ``ext::`` transport, every object it fetches checked (``fsck``)
and no repository above the one named; whatever
fails is one ``ConfigError`` naming the source and the repository. File contents come
through one ``git cat-file --batch`` process (``Blobs``), and each file's last commit from
one ``git log`` pass read as it streams (``last_commits``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from flexmatch.errors import ConfigError

_LOG_FORMAT = "--format=%x01%H%x00%an <%ae>%x00%aI"
# every object a clone or fetch brings is checked, and a tree naming a full path, ``..``
# or ``.`` (mere warnings to git) is an error: such a repository is refused
_CHECKED = [
    "transfer.fsckObjects=true",
    "fetch.fsckObjects=true",
    "receive.fsckObjects=true",
    *(
        f"{kind}.fsck.{check}=error"
        for kind in ("fetch", "receive")
        for check in ("fullPathname", "hasDot", "hasDotdot", "hasDotgit")
    ),
]
_FSCK_ERROR = re.compile(r"^error: object [0-9a-f]+: (\w+): (.*)$")


@dataclass(frozen=True)
class Commit:
    """The last commit that changed a file."""

    sha: str
    author: str
    date: str


class Git:
    """``git`` run on one repository, every failure a ``ConfigError`` naming the source."""

    def __init__(self, source: str, label: str, folder: Path, timeout: float) -> None:
        self.source = source
        self.label = label
        self.folder = folder
        self.timeout = timeout
        executable = shutil.which("git")
        if executable is None:
            raise ConfigError(f"source '{source}': the 'git' command is not installed")
        self.executable = executable
        self.env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",  # a private repository fails, never waits for a user
            "GIT_PROTOCOL_FROM_USER": "0",  # no protocol allowed only "from the user"
            "GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"),
            "GIT_OPTIONAL_LOCKS": "0",  # reading never writes the user's index
            "GIT_CEILING_DIRECTORIES": str(folder.parent),  # never a repository above it
            "LC_ALL": "C",
        }

    def command(self, *args: str, here: bool = True) -> list[str]:
        where = ["-C", str(self.folder)] if here else []
        # ext:: runs a command: never, whatever the user's protocol.allow says
        checked = [item for setting in _CHECKED for item in ("-c", setting)]
        return [self.executable, "-c", "protocol.ext.allow=never", *checked, *where, *args]

    def fail(self, what: str, detail: str) -> ConfigError:
        return ConfigError(f"source '{self.source}': git cannot {what}: {detail}")

    def run(self, *args: str, what: str, here: bool = True) -> bytes:
        """The output of ``git args``; a failure says it could not do ``what``."""
        code, out, err = self.status(*args, what=what, here=here)
        if code != 0:
            raise self.fail(what, _reason(err))
        return out

    def status(self, *args: str, what: str, here: bool = True) -> tuple[int, bytes, bytes]:
        """Exit code, output and messages of ``git args`` (only a timeout or a git that
        cannot start raises)."""
        try:
            done = subprocess.run(
                self.command(*args, here=here),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=self.env,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise self.fail(what, f"no answer within {self.timeout:g}s (options.timeout)") from None
        except OSError as exc:
            raise self.fail(what, exc.strerror or str(exc)) from None
        return done.returncode, done.stdout, done.stderr


def _reason(stderr: bytes) -> str:
    """Git's last message line, without its ``fatal:``/``error:`` tag."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return "it failed without saying why"
    for line in lines:  # an object the fsck refused: the cause, not git's last words
        if found := _FSCK_ERROR.match(line):
            return f"an object fails git's checks (fsck): {found[1]}: {found[2]}"
    line = lines[-1]
    for tag in ("fatal:", "error:"):
        line = line.removeprefix(tag).strip()
    return line.split(" (or any of the parent directories)")[0]


class Blobs:
    """One ``git cat-file --batch`` process: every file's bytes through one pipe."""

    def __init__(self, git: Git) -> None:
        self.git = git
        self.lock = threading.Lock()
        self.process = subprocess.Popen(
            git.command("cat-file", "--batch"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=git.env,
        )

    def read(self, blob: str) -> bytes:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        what = f"read blob {blob} of {self.git.label}"
        stopped = threading.Event()

        def stop() -> None:
            stopped.set()
            self.process.kill()

        header: list[bytes] = []
        with self.lock:
            timer = threading.Timer(self.git.timeout, stop)
            timer.start()
            try:
                stdin.write(blob.encode() + b"\n")
                stdin.flush()
                header = stdout.readline().split()
                if len(header) == 3 and header[1] == b"blob":
                    size = int(header[2])
                    data = stdout.read(size)
                    stdout.read(1)  # the newline after the content
                else:
                    size, data = -1, b""
            except (OSError, ValueError):
                size, data = -1, b""
            finally:
                timer.cancel()
        if stopped.is_set():
            raise self.git.fail(what, f"no answer within {self.git.timeout:g}s (options.timeout)")
        if len(data) != size:
            raise self.git.fail(what, "not found" if b"missing" in header else "git stopped")
        return data

    def close(self) -> None:
        """Stop the process now. Closing its input does not end it when a parse worker
        was forked while it ran: the worker holds a copy of the pipe's writing end, so
        git never reads the end of its input (a sync used to wait 10 s here for it). Every
        answer asked for has been read, so it is killed, with nothing lost."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def last_commits(git: Git, commit: str, since: str | None, paths: set[str]) -> dict[str, Commit]:
    """The last commit that changed each of ``paths``, by one ``git log --name-status``
    pass from ``commit`` (first back to ``since``, then, for any path not found there,
    the whole history); stopped as soon as every path is found."""
    if not paths:
        return {}
    found: dict[str, Commit] = {}
    for bound in ([f"^{since}"] if since else []) + [None]:
        missing = paths - found.keys()
        if not missing:
            break
        extra = [bound] if bound else []
        found.update(_log(git, commit, extra, missing))
    if found.keys() < paths:  # changed only by a merge: the commit read stands for it
        head = _log(git, commit, ["-1"], None)
        fallback = next(iter(head.values()), Commit(commit, "", ""))
        found = {path: found.get(path, fallback) for path in paths}
    return found


def _log(git: Git, commit: str, extra: list[str], paths: set[str] | None) -> dict[str, Commit]:
    """Read ``git log`` as it comes; ``paths=None``: just the first commit (under "")."""
    command = git.command(
        "log", "-z", "--name-status", "--no-renames", _LOG_FORMAT, *extra, commit, "--"
    )
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=git.env,
    )
    stopped = threading.Event()

    def stop() -> None:
        stopped.set()
        process.kill()

    timer = threading.Timer(git.timeout, stop)
    timer.start()
    found: dict[str, Commit] = {}
    try:
        assert process.stdout is not None
        for record in _records(process.stdout):
            fields = record.decode("utf-8", "surrogateescape").split("\0")
            if len(fields) < 3:
                continue
            info = Commit(sha=fields[0], author=fields[1], date=fields[2])
            if paths is None:
                return {"": info}
            for name in fields[4::2]:  # "\nstatus", path, status, path...
                if name in paths and name not in found:
                    found[name] = info
            if len(found) == len(paths):
                break
    finally:
        timer.cancel()
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
    if stopped.is_set():
        what = f"read the history of {commit[:12]} in {git.label}"
        raise git.fail(what, f"no answer within {git.timeout:g}s (options.timeout)")
    return found


def _records(stream: IO[bytes]) -> Iterator[bytes]:
    """The commits of ``git log`` output (each starts with \\x01), as they are read."""
    buffer = b""
    while chunk := stream.read(65536):
        buffer += chunk
        *complete, buffer = buffer.split(b"\x01")
        yield from (record for record in complete if record)
    if buffer:
        yield buffer
