"""Files and folders as a files source reads them (``sources/files.py``): the walk."""

from __future__ import annotations

import os
from pathlib import Path

from flexmatch.inputs.sources.files import discover


def test_walk_skips_hidden_and_symlinks_and_applies_globs(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / ".git").mkdir()
    for name in ("a.md", "b.txt", "sub/c.md", "sub/draft-d.md", ".hidden.md", ".git/e.md"):
        (root / name).write_text("x")
    os.symlink(root / "a.md", root / "link.md")
    os.symlink(root / "sub", root / "linked-dir")
    tasks, missing = discover([root])
    assert [t.path.relative_to(root).as_posix() for t in tasks] == [
        "a.md",
        "b.txt",
        "sub/c.md",
        "sub/draft-d.md",
    ]
    tasks, _ = discover([root], include=["*.md"], exclude=["draft-*"])
    assert [t.path.relative_to(root).as_posix() for t in tasks] == ["a.md", "sub/c.md"]
    tasks, missing = discover([root / "nope", root / "link.md", root / "b.txt"])
    assert [t.path.name for t in tasks] == ["b.txt"]
    assert "no such file or folder" in missing[0].error
    assert "symlinks are not followed" in missing[1].error


def test_named_special_files_are_refused_for_what_they_are(tmp_path: Path) -> None:
    """A FIFO or a device exists: it is refused as not a regular file, not as missing."""
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    tasks, refused = discover([fifo, Path("/dev/zero"), tmp_path / "gone.md"])
    assert tasks == []
    errors = [failed.error for failed in refused]
    assert errors[0] == f"{fifo}: not a regular file: a FIFO"
    assert errors[1] == "/dev/zero: not a regular file: a character device"
    assert errors[2].endswith("gone.md: no such file or folder")
