"""Where chain, prompt and config files are found.

A knowledge base's own ``chains/`` and ``prompts/`` folders are searched first, so a user
overrides any built-in by file name; then the built-ins, which live at the repository
root in a checkout and under ``flexmatch/_data`` in an installed wheel.
"""

from __future__ import annotations

from pathlib import Path

from flexmatch.errors import ConfigError

_PACKAGE_DIR = Path(__file__).resolve().parent


def builtin_dir(kind: str) -> Path:
    """The built-in folder for ``kind`` (chains, prompts or configs)."""
    for candidate in (_PACKAGE_DIR / "_data" / kind, _PACKAGE_DIR.parent / kind):
        if candidate.is_dir():
            return candidate
    raise ConfigError(f"built-in '{kind}' folder is missing from the FlexMatch installation")


def search_path(kind: str, kb_dir: Path | None) -> list[Path]:
    """Folders to look in for ``kind`` files, most specific first."""
    dirs = [kb_dir / kind] if kb_dir is not None else []
    return [*dirs, builtin_dir(kind)]


def find(kind: str, name: str, kb_dir: Path | None, suffixes: tuple[str, ...] = ("",)) -> Path:
    """Resolve ``name`` (a file name, a stem, or a path) to an existing file."""
    as_path = Path(name).expanduser()
    if as_path.is_absolute() or len(as_path.parts) > 1:
        base = as_path if as_path.is_absolute() or kb_dir is None else kb_dir / as_path
        if base.is_file():
            return base
        raise ConfigError(f"{kind[:-1]} file not found: {base}")
    for folder in search_path(kind, kb_dir):
        for suffix in suffixes:
            candidate = folder / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
    folders = search_path(kind, kb_dir)
    available = sorted({p.stem for d in folders if d.is_dir() for p in d.iterdir()})
    raise ConfigError(
        f"no {kind[:-1]} named '{name}' (looked in {', '.join(str(d) for d in folders)}); "
        f"available: {', '.join(available) or 'none'}"
    )
