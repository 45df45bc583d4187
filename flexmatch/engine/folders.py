"""Owner-only folders for what a knowledge base keeps of its tenants (``.flexmatch``: the
store, the archive, the keys and the LLM cache): made 700 whatever the umask, and narrowed
to 700 when an older version left them wider. No flexmatch imports, so any layer may use it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


def private_folder(path: Path, root: Path | None = None) -> Path:
    """``path`` as a folder; each part it has to create from ``root`` down (``root``
    defaults to ``path``) is made 700, where ``mkdir(parents=True)`` would use the umask
    (often 755). Folders above ``root`` are made as usual, and existing ones are left as
    they are: one a user chose (a store's parent) is theirs to set."""
    root = path if root is None else root
    root.parent.mkdir(parents=True, exist_ok=True)
    missing: list[Path] = []
    for folder in (path, *path.parents):
        if folder.is_dir() or folder == root.parent:
            break
        missing.append(folder)
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            folder.mkdir(mode=0o700)
    return path


def narrow_folder(path: Path) -> None:
    """Make a folder of ours 700 if it is wider (made by an older version or the umask);
    a folder we cannot change (another owner, read-only mount) is left as it is."""
    with contextlib.suppress(OSError):
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            os.chmod(path, 0o700)
