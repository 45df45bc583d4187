"""The config templates a knowledge base is made from (``flexmatch init``), and the
built-in prompts a knowledge base can take a copy of to edit (``eject_prompt``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flexmatch import resources
from flexmatch.config import CONFIG_FILE, load_config
from flexmatch.errors import ConfigError
from flexmatch.yamlio import load_yaml_text


def deep_merge(base: dict[str, Any], fragment: dict[str, Any]) -> dict[str, Any]:
    """``fragment`` over ``base``, mapping by mapping (a setup over a config)."""
    merged = dict(base)
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _raw_yaml(path: Path) -> dict[str, Any]:
    """A built-in YAML mapping as written (no ``${ENV}`` interpolation)."""
    data = load_yaml_text(path.read_text(encoding="utf-8"), str(path))
    return dict(data) if isinstance(data, dict) else {}


def _leading_comment(path: Path) -> list[str]:
    """A YAML file's leading comment lines, without their ``#``: what the file is."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return lines


def _first_sentence(lines: list[str]) -> str:
    text = " ".join(lines)
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def templates() -> dict[str, str]:
    """The built-in config templates ``init`` accepts, by name, each with what it is
    (its file's first comment line): ``default``, and every built-in evaluation setup
    (``configs/setups``), which is a fragment of a ``flexmatch.yaml`` over the default."""
    found = {
        "default": "The defaults: questions (sentences without an LLM), hybrid "
        "retrieval, the offline reranker."
    }
    for path in sorted((resources.builtin_dir("configs") / "setups").glob("*.yaml")):
        if path.stem not in found:
            found[path.stem] = _first_sentence(_leading_comment(path))
    return found


def template_text(template: str) -> str:
    """The ``flexmatch.yaml`` a template makes: ``default`` as shipped (comments and
    all); a setup merged over it (``corpus_sources``, an evaluation setting, left
    out); or a file named by path, as it is."""
    as_path = Path(template)
    if template == "default" or as_path.suffix in (".yaml", ".yml") or len(as_path.parts) > 1:
        source = resources.find("configs", template, None, suffixes=("", ".yaml"))
        return source.read_text(encoding="utf-8")
    known = templates()
    if template not in known:
        raise ConfigError(
            f"no template '{template}': use one of {', '.join(known)}, or the path of a "
            "flexmatch.yaml (.yaml)"
        )
    configs = resources.builtin_dir("configs")
    base = _raw_yaml(configs / "default.yaml")  # ${ENV} kept as written
    fragment = _raw_yaml(configs / "setups" / f"{template}.yaml")
    fragment.pop("corpus_sources", None)
    merged = deep_merge(base, fragment)
    about = _leading_comment(configs / "setups" / f"{template}.yaml")
    header = [f"FlexMatch knowledge base from the '{template}' template.", *about]
    comment = "".join(f"# {line}\n".replace("# \n", "#\n") for line in header)
    return comment + yaml.safe_dump(merged, sort_keys=False, allow_unicode=True)


def init(path: str | Path, template: str = "default") -> Path:
    """Create a knowledge-base folder from a config template (``templates()``, or a
    file's path)."""
    folder = Path(path).expanduser().resolve()
    target = folder / CONFIG_FILE
    if target.exists():
        raise ConfigError(f"{target} already exists; not overwriting it")
    text = template_text(template)
    folder.mkdir(parents=True, exist_ok=True)
    for sub in ("chains", "prompts"):
        (folder / sub).mkdir(exist_ok=True)
    target.write_text(text, encoding="utf-8")
    load_config(folder)  # a template that does not validate is a bug: say so now
    return target


def builtin_prompts() -> list[str]:
    """The file names of the prompts FlexMatch ships (``questions.j2``, …)."""
    folder = resources.builtin_dir("prompts")
    return sorted(p.name for p in folder.iterdir() if p.is_file())


def eject_prompt(path: str | Path, name: str, *, force: bool = False) -> Path:
    """Copy a built-in prompt into the knowledge base's ``prompts/`` folder to edit:
    the knowledge base then uses that copy (its folder is searched first). An
    existing copy is kept unless ``force``; a changed prompt re-indexes the documents
    its chain wrote (``flexmatch reindex``)."""
    known = builtin_prompts()
    stems = {k: {Path(k).stem, k.split(".", 1)[0]} for k in known}  # facts.md, facts
    chosen = name if name in known else next((k for k in known if name in stems[k]), "")
    if not chosen or Path(name).name != name:
        raise ConfigError(f"no built-in prompt '{name}': one of {', '.join(known)}")
    target = Path(path).expanduser().resolve() / "prompts" / chosen
    if target.exists() and not force:
        raise ConfigError(f"{target} already exists; not overwriting it (--force does)")
    target.parent.mkdir(parents=True, exist_ok=True)
    source = resources.builtin_dir("prompts") / chosen
    target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    return target
