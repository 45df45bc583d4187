"""Reading YAML files with ``${ENV}`` interpolation and errors that name the file and field."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from flexmatch.errors import ConfigError

_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

ModelT = TypeVar("ModelT", bound=BaseModel)


def interpolate(value: Any, env: dict[str, str], where: str) -> Any:
    """Replace ``${NAME}`` and ``${NAME:-default}`` in every string of ``value``."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise ConfigError(f"{where}: environment variable ${{{name}}} is not set")

        return _ENV_PATTERN.sub(substitute, value)
    if isinstance(value, dict):
        return {k: interpolate(v, env, where) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, where) for v in value]
    return value


MAX_YAML_DEPTH = 100
"""Levels a config file may nest: PyYAML builds nested values by recursion, so a deeper
file would end in a RecursionError instead of a message."""


def yaml_depth(text: str) -> int:
    """How deeply mappings and sequences nest in ``text``, from PyYAML's event stream
    (read iteratively, whatever the depth); it stops counting past ``MAX_YAML_DEPTH``."""
    depth = deepest = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_YAML_DEPTH:
                break
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return deepest


def load_yaml_text(text: str, where: str) -> Any:
    """``yaml.safe_load`` of ``text`` with errors that name ``where``: invalid YAML and
    nesting deeper than ``MAX_YAML_DEPTH`` are ``ConfigError`` s, never tracebacks."""
    try:
        if yaml_depth(text) > MAX_YAML_DEPTH:
            raise ConfigError(f"{where}: nested too deeply (over {MAX_YAML_DEPTH} levels)")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {exc}") from exc


def read_yaml(path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Load a YAML mapping from ``path`` with environment interpolation."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM some editors write is no error
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: file not found") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    raw = load_yaml_text(text, str(path))
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    return interpolate(raw, dict(os.environ) if env is None else env, str(path))


def validation_message(where: str, exc: ValidationError) -> str:
    """A readable one-line-per-problem message naming the file and each field at fault."""
    lines = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "(top level)"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        lines.append(f"{where}: field '{field}': {message}")
    return "\n".join(lines)


def validate(model: type[ModelT], data: Any, where: str) -> ModelT:
    """Validate ``data`` against ``model`` or raise a ConfigError naming ``where``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_message(where, exc)) from exc
