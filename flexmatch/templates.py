"""Templates (prompts and record renderings): sandboxed Jinja, strict undefined variables.

Data inside prompts is wrapped in tags (``<chunk>``, ``<document>``…); the ``fence``
filter makes sure a document cannot close those tags itself and pose as instructions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.sandbox import SandboxedEnvironment

from flexmatch import resources
from flexmatch.errors import PromptError

_TAG = re.compile(r"<(/?)(\s*)(chunk|document|query|candidates|instructions|title)\b", re.I)


def fence(text: Any) -> str:
    """Neutralise our delimiter tags inside data so it cannot end its own block."""
    return _TAG.sub(lambda m: f"‹{m.group(1)}{m.group(3)}", str(text))


def truncate_chars(text: Any, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters on a word boundary, marking the cut."""
    value = str(text)
    if len(value) <= limit:
        return value
    return value[:limit].rsplit(" ", 1)[0] + " […]"


class PromptTemplate:
    """A loaded template, with the variables it needs known up front."""

    def __init__(self, path: Path, source: str, env: SandboxedEnvironment) -> None:
        self.path = path
        try:
            self.variables = meta.find_undeclared_variables(env.parse(source))
            self._template = env.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise PromptError(f"{path}:{exc.lineno}: template syntax error: {exc.message}") from exc

    def check(self, provided: set[str]) -> None:
        """Fail at load time if the template uses a variable the chain never provides."""
        unknown = self.variables - provided
        if unknown:
            raise PromptError(
                f"{self.path}: unknown template variable(s) {', '.join(sorted(unknown))}; "
                f"this chain provides: {', '.join(sorted(provided))}"
            )

    def render(self, **context: Any) -> str:
        try:
            return self._template.render(**context).strip()
        except jinja2.UndefinedError as exc:
            raise PromptError(f"{self.path}: {exc.message}") from exc
        except jinja2.TemplateError as exc:
            raise PromptError(f"{self.path}: could not render: {exc}") from exc


def make_environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False
    )
    env.filters["fence"] = fence
    env.filters["truncate_chars"] = truncate_chars
    return env


def load_prompt(name: str, kb_dir: Path | None, provided: set[str]) -> PromptTemplate:
    """Find the prompt ``name`` (a user's ``prompts/`` first) and check its variables."""
    path = resources.find("prompts", name, kb_dir, suffixes=("", ".j2", ".jinja"))
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"{path}: cannot read prompt: {exc}") from exc
    template = PromptTemplate(path, source, make_environment())
    template.check(provided)
    return template
